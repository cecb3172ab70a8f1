// @ts-check
import js from '@eslint/js';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

/**
 * The architecture, lowest layer first. A folder may import from its own layer's
 * libraries only where listed, and from every lower layer; never from a higher one.
 * The apps (server, agent, gateway) never import each other: the CLI composes them.
 * Exported for test/lint-layers.test.ts, which checks that every folder of src is placed here.
 */
export const layers = [
  ['core', 'http1'],
  ['catalog', 'gpu', 'models'],
  ['config', 'engines', 'planner', 'protocol'],
  // Certificates and trust: under the store (which keeps the CA), the client and the parts that serve.
  ['tls'],
  // Kubernetes mode's objects and client: beside the store, under the server that drives them.
  ['placement', 'store', 'client', 'kube'],
  ['auth'],
  ['server', 'agent', 'gateway'],
  ['cli'],
];

/** Imports allowed sideways, inside one layer. */
const sideways = {
  // The HTTP server that every part listens with refuses a bad listen address with core's coded errors.
  http1: ['core'],
  // The engines implement what the planner asks of them (planner/plan-engine.ts); the planner is given them.
  engines: ['planner'],
  // The settings file's models are checked against the engines of the registry.
  config: ['engines'],
  // Device classes are named one way, by the catalog's rules.
  gpu: ['catalog'],
  // A model source is read one way: the catalog validates with the parser that resolves it.
  catalog: ['models'],
  // The store keeps placement's shards as they are.
  store: ['placement'],
};

const zones = [];
layers.forEach((layer, i) => {
  const higher = layers.slice(i + 1).flat();
  for (const folder of layer) {
    const peers = layer.filter((p) => p !== folder && !(sideways[folder] ?? []).includes(p));
    const forbidden = [...higher, ...peers];
    if (forbidden.length === 0) continue;
    zones.push({
      target: `./src/${folder}`,
      from: forbidden.map((f) => `./src/${f}`),
      message: `src/${folder} sits below these folders (see the layers in eslint.config.js): pass what it needs in from the composition root instead.`,
    });
  }
});

/**
 * Inside src/server the same rule, one level down, lowest first: what everything stands on (the
 * nodes and their channel, the control planes of a cluster, the event hub, and the state the
 * fleets read: catalog, origins, settings, keys), then the fleets, then the services (model
 * changes, the autoscaler, the mirror, traffic), then the API's routes. The files at the root of
 * src/server are the composition root, above all of it: no folder of src/server imports them.
 * Exported for test/lint-layers.test.ts, which checks that every folder of src/server is placed here.
 */
export const serverLayers = [
  ['nodes', 'cluster', 'events', 'state'],
  // The Fleet interface, and the agent fleet and the Kubernetes fleet in a folder each under it.
  ['fleets'],
  ['services', 'autoscale', 'mirror', 'traffic'],
  ['api'],
];

serverLayers.forEach((layer, i) => {
  const higher = serverLayers.slice(i + 1).flat();
  for (const folder of layer) {
    // No sideways imports inside a layer of src/server: none is needed so far.
    const peers = layer.filter((p) => p !== folder);
    zones.push({
      target: `./src/server/${folder}`,
      // Globs throughout (a zone may not mix them with paths): `*.ts` is the composition root.
      from: ['./src/server/*.ts', ...[...higher, ...peers].map((f) => `./src/server/${f}/**`)],
      message: `src/server/${folder} sits below these parts of src/server (see serverLayers in eslint.config.js): take what it needs as a dependency, passed in from above.`,
    });
  }
});

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/', 'console/dist/', '.llmgw/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      // Sources import each other as './x.js' (nodenext); the file on disk is x.ts. Without this
      // mapping no import resolves, and no-restricted-paths silently skips what it cannot resolve.
      'import-x/resolver-next': [
        createNodeResolver({
          extensions: ['.ts', '.tsx', '.mts', '.js', '.mjs', '.cjs', '.json', '.node'],
          extensionAlias: { '.js': ['.ts', '.tsx', '.js'], '.mjs': ['.mts', '.mjs'] },
          conditionNames: ['types', 'import', 'node', 'require', 'default'],
        }),
      ],
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      'import-x/no-default-export': 'error',
      'import-x/no-restricted-paths': ['error', { zones }],
      // An import the resolver cannot follow is one the layer rule cannot check: make it an error.
      'import-x/no-unresolved': 'error',
      'max-params': ['error', 4],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: Object.fromEntries(
        [
          'process',
          'console',
          'URL',
          'Buffer',
          'fetch',
          'performance',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'AbortController',
          'AbortSignal',
          'TextEncoder',
          'TextDecoder',
          'structuredClone',
        ].map((g) => [g, 'readonly']),
      ),
    },
  },
  {
    files: ['eslint.config.js', 'vitest.config.ts', 'console/vite.config.ts'],
    rules: { 'import-x/no-default-export': 'off' },
  },
  {
    // The web console: React in the browser, a client of /api/v1 like llmgw ctl.
    files: ['console/src/**/*.{ts,tsx}'],
    ...reactHooks.configs.flat['recommended-latest'],
    rules: {
      ...reactHooks.configs.flat['recommended-latest'].rules,
      // The server's wire types, never its code: a value import would bundle the server into the page.
      // The API's views (src/protocol/*-views.ts) are the exception: they import nothing but types, and
      // their few functions (how a download's progress reads) say it the same way ctl does; so is
      // config/yaml-lines.ts (which line of YAML a field is on), which needs only `yaml`.
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)src/(?!protocol/[\\w-]+-views\\.js$|config/yaml-lines\\.js$)',
              allowTypeImports: true,
              message:
                'the console imports only types from src/ (import type), and values only from src/protocol/*-views.ts and src/config/yaml-lines.ts: the rest runs on the server.',
            },
          ],
        },
      ],
    },
  },
  {
    files: [
      'test/**',
      'bench/**',
      'src/**/*.test.ts',
      'src/**/*.contract.ts',
      'console/src/**/*.test.{ts,tsx}',
    ],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Engines read max_tokens, which OpenAI's types mark deprecated; tests send what engines read.
      '@typescript-eslint/no-deprecated': 'off',
      'max-params': 'off',
    },
  },
  {
    // The API's answers in end-to-end tests (control-plane.ts's api()) and the fake Kubernetes API
    // server's objects are read field by field; typing each would test the types, not the server.
    // Every other test, in src/ and test/, uses no `any`.
    files: [
      'test/support/control-plane.ts',
      'test/fakes/kube-apiserver/**',
      'test/fakes/engines/fakes.test.ts',
      'test/kubernetes.test.ts',
      'test/kubernetes-logs.test.ts',
    ],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
