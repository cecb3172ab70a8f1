import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * The layer rule in eslint.config.js, run as `npm run lint` runs it, on sources that are not
 * in the tree. Only the import rules run: they need no type information, so the code needs no
 * project, and a file that does not exist can be linted at its would-be path.
 */
const eslint = new ESLint({
  cwd: root,
  overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
  ruleFilter: ({ ruleId }) => ruleId.startsWith('import-x/'),
});

async function lint(filePath: string, code: string): Promise<{ ruleId: string | null; message: string }[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map(({ ruleId, message }) => ({ ruleId, message }));
}

describe('the layer rule', () => {
  it.each([
    [
      'core imports the gateway (upward)',
      'src/core/new-file.ts',
      "import { Gateway } from '../gateway/gateway.js';",
      'src/core',
    ],
    [
      'a type-only import counts too',
      'src/core/new-file.ts',
      "import type { GatewayOptions } from '../gateway/gateway.js';",
      'src/core',
    ],
    [
      'the server imports the agent (sideways, between apps)',
      'src/server/new-file.ts',
      "import { Agent } from '../agent/agent.js';",
      'src/server',
    ],
    [
      'placement imports the server (upward)',
      'src/placement/new-file.ts',
      "import { Catalog } from '../server/state/catalog.js';",
      'src/placement',
    ],
    [
      'a file deeper in a folder imports upward',
      'src/placement/sub/new-file.ts',
      "import { Catalog } from '../../server/state/catalog.js';",
      'src/placement',
    ],
    [
      'protocol imports engines (sideways, not allowed)',
      'src/protocol/new-file.ts',
      "import type { Engine } from '../engines/types.js';",
      'src/protocol',
    ],
    [
      'the planner imports engines (they implement its PlanEngine; it is given them)',
      'src/planner/new-file.ts',
      "import { engines } from '../engines/registry.js';",
      'src/planner',
    ],
    [
      'engines import config (config imports engines: one way)',
      'src/engines/new-file.ts',
      "import type { Settings } from '../config/load.js';",
      'src/engines',
    ],
    [
      'the catalog imports engines (below them: it is given them)',
      'src/catalog/new-file.ts',
      "import { engines } from '../engines/registry.js';",
      'src/catalog',
    ],
  ])('refuses: %s', async (_name, filePath, code, folder) => {
    const messages = await lint(filePath, `${code}\nexport const used = [] as unknown[];\n`);
    expect(messages).toEqual([
      {
        ruleId: 'import-x/no-restricted-paths',
        message: expect.stringContaining(
          `${folder} sits below these folders (see the layers in eslint.config.js)`,
        ),
      },
    ]);
  });

  it.each([
    [
      'the gateway imports core (downward)',
      'src/gateway/new-file.ts',
      "import { LlmgwError } from '../core/errors.js';",
    ],
    [
      'the CLI composes the apps',
      'src/cli/new-file.ts',
      "import { Agent } from '../agent/agent.js';\nimport { Gateway } from '../gateway/gateway.js';",
    ],
    [
      'a listed sideways import (the store keeps placement shards)',
      'src/store/new-file.ts',
      "import type { Shard } from '../placement/types.js';",
    ],
    [
      'the settings file checks its models against the engines (config -> engines, sideways)',
      'src/config/new-file.ts',
      "import { engines } from '../engines/registry.js';",
    ],
    ['a file imports its own folder', 'src/core/new-file.ts', "import { LlmgwError } from './errors.js';"],
    [
      'tests import anything',
      'test/new-file.test.ts',
      "import { Gateway } from '../src/gateway/gateway.js';",
    ],
  ])('allows: %s', async (_name, filePath, code) => {
    expect(await lint(filePath, `${code}\nexport const used = [] as unknown[];\n`)).toEqual([]);
  });

  // The rule skips what it cannot resolve: were `./x.js` -> x.ts ever to stop resolving, it
  // would pass every import again, so an unresolved import is an error of its own.
  it('refuses an import it cannot resolve, so the layer rule cannot go blind', async () => {
    const messages = await lint(
      'src/core/new-file.ts',
      "import { nothing } from './no-such-file.js';\nexport const used = nothing;\n",
    );
    expect(messages).toEqual([
      { ruleId: 'import-x/no-unresolved', message: expect.stringContaining('./no-such-file.js') },
    ]);
  });
});

describe('the layer rule inside src/server', () => {
  it.each([
    [
      'a fleet imports the API (upward)',
      'src/server/fleets/agent/new-file.ts',
      "import { createApi } from '../../api/app.js';",
      'src/server/fleets',
    ],
    [
      'a service imports the composition root (upward)',
      'src/server/services/new-file.ts',
      "import { ControlPlane } from '../control-plane.js';",
      'src/server/services',
    ],
    [
      'a route imports the composition root (upward)',
      'src/server/api/new-file.ts',
      "import type { ControlPlaneOptions } from '../control-plane.js';",
      'src/server/api',
    ],
    [
      'the state the fleets read imports a service (upward, type-only)',
      'src/server/state/new-file.ts',
      "import type { ContextDeps } from '../services/model-context.js';",
      'src/server/state',
    ],
    [
      'the event hub imports a service (upward)',
      'src/server/events/new-file.ts',
      "import { changeModelGpus } from '../services/model-gpus.js';",
      'src/server/events',
    ],
    [
      'the mirror imports the autoscaler (sideways between services)',
      'src/server/mirror/new-file.ts',
      "import type { Autoscaler } from '../autoscale/autoscaler.js';",
      'src/server/mirror',
    ],
    [
      'the nodes import the catalog (sideways at the bottom)',
      'src/server/nodes/new-file.ts',
      "import type { Catalog } from '../state/catalog.js';",
      'src/server/nodes',
    ],
  ])('refuses: %s', async (_name, filePath, code, folder) => {
    const messages = await lint(filePath, `${code}\nexport const used = [] as unknown[];\n`);
    expect(messages).toEqual([
      {
        ruleId: 'import-x/no-restricted-paths',
        message: expect.stringContaining(
          `${folder} sits below these parts of src/server (see serverLayers in eslint.config.js)`,
        ),
      },
    ]);
  });

  it.each([
    [
      'the composition root imports every part',
      'src/server/new-file.ts',
      "import { createApi } from './api/app.js';\nimport { Mirror } from './mirror/mirror.js';\nimport { Catalog } from './state/catalog.js';",
    ],
    [
      'a route imports services, the nodes and the state (downward)',
      'src/server/api/new-file.ts',
      "import { changeModelGpus } from '../services/model-gpus.js';\nimport type { NodeRegistry } from '../nodes/node-registry.js';\nimport type { Catalog } from '../state/catalog.js';",
    ],
    [
      'a fleet imports the nodes, the events and the state (downward)',
      'src/server/fleets/agent/new-file.ts',
      "import type { AgentHub } from '../../nodes/agent-hub.js';\nimport type { EventHub } from '../../events/event-hub.js';\nimport type { Catalog } from '../../state/catalog.js';",
    ],
    [
      'a service imports its own folder',
      'src/server/services/new-file.ts',
      "import { clusterClasses } from './model-fit.js';",
    ],
  ])('allows: %s', async (_name, filePath, code) => {
    expect(await lint(filePath, `${code}\nexport const used = [] as unknown[];\n`)).toEqual([]);
  });
});

describe('the layers table', () => {
  // A folder missing from the table gets no zone, and so no rule at all.
  it('places every folder of src', async () => {
    const { layers } = (await import(pathToFileURL(join(root, 'eslint.config.js')).href)) as {
      layers: string[][];
    };
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true }).filter((e) => e.isDirectory());
    const unplaced = folders.map((e) => e.name).filter((name) => !layers.flat().includes(name));
    expect(unplaced).toEqual([]);
  });

  // The same inside src/server: a folder of it missing from serverLayers may import anything there.
  it('places every folder of src/server', async () => {
    const { serverLayers } = (await import(pathToFileURL(join(root, 'eslint.config.js')).href)) as {
      serverLayers: string[][];
    };
    const folders = readdirSync(join(root, 'src', 'server'), { withFileTypes: true }).filter((e) =>
      e.isDirectory(),
    );
    const unplaced = folders.map((e) => e.name).filter((name) => !serverLayers.flat().includes(name));
    expect(unplaced).toEqual([]);
  });
});

describe("the console's rule: the server's types, never its code", () => {
  const consoleLint = new ESLint({
    cwd: root,
    overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
    ruleFilter: ({ ruleId }) => ruleId === '@typescript-eslint/no-restricted-imports',
  });
  const messages = async (code: string) => {
    const [result] = await consoleLint.lintText(code, { filePath: 'console/src/views/new-view.ts' });
    return (result?.messages ?? []).map((m) => m.message);
  };

  it.each([
    ['a value from the server', "import { Catalog } from '../../../src/server/state/catalog.js';"],
    [
      'a value from a protocol module that is not an API view',
      "import { x } from '../../../src/protocol/agent-protocol.js';",
    ],
    ['a value from the planner', "import { planProfile } from '../../../src/planner/index.js';"],
  ])('refuses %s', async (_what, code) => {
    expect(await messages(code)).toEqual([
      expect.stringContaining(
        'the console imports only types from src/ (import type), and values only from src/protocol/*-views.ts',
      ),
    ]);
  });

  it.each([
    ['a type from anywhere in src', "import type { Catalog } from '../../../src/server/state/catalog.js';"],
    ["an API view's function", "import { progressText } from '../../../src/protocol/cache-views.js';"],
  ])('allows %s', async (_what, code) => {
    expect(await messages(code)).toEqual([]);
  });
});
