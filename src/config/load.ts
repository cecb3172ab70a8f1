import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';

import { validateModels } from '../catalog/validate.js';
import type { ModelSpec } from '../catalog/model-spec.js';
import { formatPath, LlmgwError, type Issue } from '../core/errors.js';
import { issuesFromZod } from '../core/zod-issues.js';
import { engines } from '../engines/registry.js';

import { envKeys, parseEnvValue, unknownVariables } from './env.js';
import { pathIssues } from './path-checks.js';
import {
  settingsSchema,
  type AgentSettings,
  type AutoscaleSettings,
  type KubernetesSettings,
  type GatewaySettings,
  type HubSettings,
  type TlsSettings,
  type PlacementSettings,
} from './schema.js';
import { settingsMaxBytes, settingsSizeMessage } from './settings-size.js';
import { parseYamlText, yamlValue } from './yaml-error.js';
import { lineOf } from './yaml-lines.js';

/** The effective settings: file, then environment, then defaults; validated and frozen. */
export interface Settings {
  readonly listen: string;
  /** `sqlite:/absolute/path` or a PostgreSQL URL. */
  readonly database: string;
  /** Absolute. */
  readonly data_dir: string;
  readonly agent: Readonly<AgentSettings>;
  readonly placement: Readonly<PlacementSettings>;
  /** Several control planes on one database: the leader's lease. */
  readonly ha: Readonly<{ lease_s: number }>;
  readonly gateway: Readonly<GatewaySettings>;
  /** The model hub; resolve with models/hub.ts hubAccess, which adds HF_ENDPOINT and HF_TOKEN. */
  readonly hub: Readonly<HubSettings>;
  /** `dir` is absolute: DATA_DIR/mirror unless set. */
  readonly mirror: Readonly<{ enabled: boolean; dir: string }>;
  /** Models declared in the file: read-only through the API. */
  readonly models: readonly ModelSpec[];
  /** `cert` and `key` are absolute when set. */
  readonly tls: Readonly<TlsSettings>;
  /** How autoscaled models are decided on. */
  readonly autoscale: Readonly<AutoscaleSettings>;
  /** Kubernetes mode when present; `kubeconfig` is absolute when set. */
  readonly kubernetes?: Readonly<KubernetesSettings>;
}

export interface SettingsSource {
  /** Where the file is, or would be written. */
  readonly path: string;
  readonly exists: boolean;
  readonly text: string;
  /** Keys set from the environment, which win over the file (`agent.engines.llamacpp.bin`). */
  readonly fromEnv: readonly string[];
}

export interface LoadedSettings {
  readonly settings: Settings;
  readonly source: SettingsSource;
  /** Not refused, but worth saying: LLMGW_ variables that set nothing. */
  readonly warnings: readonly string[];
}

export interface LoadOptions {
  /** `--config PATH`; else LLMGW_CONFIG; else config.yaml in the data dir. */
  path?: string | undefined;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Thrown for an invalid settings file; each issue carries the line it is on. */
export class SettingsError extends LlmgwError {
  readonly file: string;
  /**
   * @param reading Which reading of the text was refused, where there are two: the file on its
   * own, or with the environment's overrides (parse-written.ts).
   */
  constructor(file: string, found: readonly Issue[], reading?: string) {
    // In the order of the file, as an editor shows it; issues without a line (the environment's) last.
    const issues = [...found].sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
    const lines = issues.map((i) => {
      const where = i.line === undefined ? file : `${file}:${i.line}`;
      return i.path.length > 0 ? `${where}: ${formatPath(i.path)}: ${i.message}` : `${where}: ${i.message}`;
    });
    const head = `invalid settings, nothing was applied${reading === undefined ? '' : `; ${reading}`}:`;
    super('invalid_argument', `${head}\n${lines.join('\n')}`, { issues });
    this.name = 'SettingsError';
    this.file = file;
  }
}

/** Where the settings file is: the flag, LLMGW_CONFIG, else config.yaml in the data dir. */
export function settingsPath(options: LoadOptions): { path: string; explicit: boolean } {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const given = options.path ?? env['LLMGW_CONFIG'];
  if (given !== undefined && given !== '') return { path: resolve(cwd, given), explicit: true };
  const dataDir = env['LLMGW_DATA_DIR'] ?? './.llmgw';
  return { path: resolve(cwd, dataDir, 'config.yaml'), explicit: false };
}

/** Reads and validates the settings file; throws SettingsError before anything is applied. */
export function loadSettings(options: LoadOptions = {}): LoadedSettings {
  const { path, explicit } = settingsPath(options);
  const exists = existsSync(path);
  if (explicit && !exists) {
    throw new LlmgwError(
      'invalid_argument',
      `settings file ${path} does not exist: create it, or leave out --config to use the defaults`,
    );
  }
  // Refused by its size before it is read: see settings-size.ts.
  const bytes = exists ? statSync(path).size : 0;
  if (bytes > settingsMaxBytes) throw new SettingsError(path, [{ path: [], message: sizeWords(bytes) }]);
  const text = exists ? readFileSync(path, 'utf8') : '';
  return parseSettings(text, { ...options, path, exists });
}

/** Validates settings text as if it were the file at `path` (used before writing a new one). */
export function parseSettings(
  text: string,
  options: LoadOptions & { path: string; exists?: boolean },
): LoadedSettings {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const file = options.path;
  const bytes = Buffer.byteLength(text);
  if (bytes > settingsMaxBytes) throw new SettingsError(file, [{ path: [], message: sizeWords(bytes) }]);
  const { doc, lineCounter, errors } = parseYamlText(text);
  if (errors.length > 0) {
    throw new SettingsError(
      file,
      errors.map((e) => ({
        path: [],
        message: `${e.bound ? e.message : `not valid YAML at column ${e.column}: ${e.message}`}\n${indent(e.frame)}`,
        line: e.line,
      })),
    );
  }
  const raw: unknown = yamlValue(doc) ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new SettingsError(file, [
      {
        path: [],
        message: 'expected a mapping of keys (listen:, database:, models:, ...) at the top',
        line: 1,
      },
    ]);
  }

  // The environment wins over the file, key by key.
  const merged = structuredClone(raw) as Record<string, unknown>;
  const keys = envKeys(settingsSchema);
  const fromEnv: string[] = [];
  const envOrigin = new Map<string, string>();
  for (const key of keys) {
    const value = env[key.variable];
    if (value === undefined || value === '') continue;
    setIn(merged, key.path, parseEnvValue(value, key.schema));
    fromEnv.push(key.path.join('.'));
    envOrigin.set(key.path.join('.'), key.variable);
  }

  const locate = (issue: Issue): Issue => {
    const variable = [...envOrigin.entries()].find(([p]) => formatPath(issue.path).startsWith(p))?.[1];
    if (variable !== undefined)
      return { ...issue, message: `${issue.message} (from the environment variable ${variable})` };
    return { ...issue, line: lineOf(doc.contents, lineCounter, issue.path) };
  };

  const parsed = settingsSchema.safeParse(merged, { reportInput: true });
  if (!parsed.success) throw new SettingsError(file, issuesFromZod(settingsSchema, parsed.error).map(locate));
  const { models, issues } = validateModels(parsed.data.models, engines);
  if (issues.length > 0) {
    throw new SettingsError(
      file,
      issues.map((i) => locate({ ...i, path: ['models', ...i.path] })),
    );
  }

  const dataDir = resolve(cwd, parsed.data.data_dir);
  const database = parsed.data.database ?? `sqlite:${resolve(dataDir, 'llmgw.db')}`;
  const sqlite = database.startsWith('sqlite:') ? resolveSqlitePath(database.slice(7), cwd) : undefined;
  const places = pathIssues({
    dataDir: {
      written: typeof merged['data_dir'] === 'string' ? parsed.data.data_dir : undefined,
      path: dataDir,
    },
    database:
      sqlite === undefined || sqlite === ':memory:'
        ? undefined
        : { written: parsed.data.database, path: sqlite },
    cwd,
    named: [
      file,
      ...(sqlite === undefined ? [] : [sqlite, `${sqlite}-wal`, `${sqlite}-shm`]),
      ...[
        parsed.data.tls.cert,
        parsed.data.tls.key,
        parsed.data.mirror.dir,
        parsed.data.kubernetes?.kubeconfig,
      ]
        .filter((p) => p !== undefined && p !== '')
        .map((p) => resolve(cwd, p as string)),
    ],
  });
  if (places.length > 0) throw new SettingsError(file, places.map(locate));
  const settings: Settings = deepFreeze({
    listen: parsed.data.listen,
    database: sqlite === undefined ? database : `sqlite:${sqlite}`,
    data_dir: dataDir,
    agent: parsed.data.agent,
    placement: parsed.data.placement,
    ha: parsed.data.ha,
    gateway: parsed.data.gateway,
    hub: parsed.data.hub,
    mirror: {
      enabled: parsed.data.mirror.enabled,
      dir: resolve(cwd, parsed.data.mirror.dir ?? resolve(dataDir, 'mirror')),
    },
    models,
    tls: {
      ...parsed.data.tls,
      ...(parsed.data.tls.cert === undefined ? {} : { cert: resolve(cwd, parsed.data.tls.cert) }),
      ...(parsed.data.tls.key === undefined ? {} : { key: resolve(cwd, parsed.data.tls.key) }),
    },
    autoscale: parsed.data.autoscale,
    ...(parsed.data.kubernetes === undefined
      ? {}
      : {
          kubernetes: {
            ...parsed.data.kubernetes,
            kubeconfig:
              parsed.data.kubernetes.kubeconfig === '' ? '' : resolve(cwd, parsed.data.kubernetes.kubeconfig),
          },
        }),
  });
  return {
    settings,
    source: { path: file, exists: options.exists ?? false, text, fromEnv },
    warnings: unknownVariables(env, keys),
  };
}

/** The line of a key in settings text (`['models', 0, 'source']`), for a refusal found after parsing. */
export function lineOfKey(text: string, path: readonly (string | number)[]): number | undefined {
  const { doc, lineCounter, errors } = parseYamlText(text);
  return errors.length > 0 ? undefined : lineOf(doc.contents, lineCounter, path);
}

function sizeWords(bytes: number): string {
  return `the file is ${bytes} bytes, and ${settingsSizeMessage}`;
}

function resolveSqlitePath(p: string, cwd: string): string {
  return p === ':memory:' || isAbsolute(p) ? p : resolve(cwd, p);
}

function setIn(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  path.slice(0, -1).forEach((part) => {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  });
  const last = path[path.length - 1];
  if (last !== undefined) node[last] = value;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
