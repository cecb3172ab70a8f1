import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ContainerSupervisor } from '../src/agent/shards/container/container-supervisor.js';
import type { DaemonClient } from '../src/agent/shards/container/daemon.js';
import { listNodeContainers, removeContainer } from '../src/agent/shards/container/operations.js';
import { EngineRunners } from '../src/agent/engine-runners.js';
import { ShardExecutor } from '../src/agent/shard-executor.js';
import { Supervisor } from '../src/agent/shards/process/process-supervisor.js';
import type { ModelSpec } from '../src/catalog/model-spec.js';
import { settingsSchema } from '../src/config/schema.js';
import type { AgentMessage, ShardStatusWire } from '../src/protocol/agent-protocol.js';

import { testEngines } from './support/assignments.js';
import { buildDerivedImage, buildEngineImage, testDaemon } from './support/engine-image.js';
import { inventoryWith } from './support/inventory.js';
import { freePort } from './fakes/engines/fake-engines.js';
import { until } from './support/timing.js';

/**
 * The agent's wiring end to end on this machine's real Docker daemon: a catalog profile
 * with runtime: container goes through the shard executor (the container's shape), the
 * engine runners (made on first need) and the container supervisor, to a ready engine whose
 * logs `ctl logs` reads, and no container once the shard is gone. The engine is the fake
 * llama-server, in an image built here with it at /app/llama-server, where llama.cpp's
 * images keep theirs.
 */

const daemon = await testDaemon();
if ('skip' in daemon) console.log(`containers-wiring.test.ts skipped: ${daemon.skip}`);
const client = 'client' in daemon ? daemon.client : (undefined as unknown as DaemonClient);
const node = `wiring-${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'llmgw-wiring-'));
let image = '';

/** The fake engine image with an executable /app/llama-server, as llama.cpp's images have. */
/** The base image with /app/llama-server, as the real llama.cpp images have it. */
function llamaLikeImage(base: string): Promise<string> {
  return buildDerivedImage(client, base, base.replace(':', '-llamacpp:'), [
    { path: 'app/llama-server', content: "#!/usr/bin/node\nimport('/app/llama-server.mjs');\n", mode: 0o755 },
  ]);
}

describe.skipIf('skip' in daemon)('a container profile, from the assignment to a ready container', () => {
  beforeAll(async () => {
    image = await llamaLikeImage(await buildEngineImage(client));
  }, 120_000);

  afterAll(async () => {
    if ('client' in daemon)
      for (const c of await listNodeContainers(client, node)) await removeContainer(client, c.id);
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs, reports ready, shows its logs, and leaves no container at scale 0', async () => {
    const gguf = join(dir, 'm.gguf');
    writeFileSync(gguf, 'GGUF');
    const sent: AgentMessage[] = [];
    const late: { exec?: ShardExecutor } = {};
    const engines = new EngineRunners({
      supervisor: new Supervisor({ logDir: join(dir, 'logs'), onStatus: () => undefined }),
      containers: () =>
        Promise.resolve(
          new ContainerSupervisor({
            client,
            node,
            onStatus: () => late.exec?.report(),
            onRemoved: () => late.exec?.report(),
            healthIntervalMs: 100,
          }),
        ),
      onContainers: () => late.exec?.resync(),
      onChange: () => late.exec?.report(),
    });
    const exec = new ShardExecutor({
      dataDir: dir,
      logger: pino({ level: 'silent' }),
      supervisor: engines,
      localBins: {},
      inventory: () => inventoryWith([]),
      send: (m) => {
        sent.push(m);
        return true;
      },
      bindHost: '127.0.0.1',
      install: () => Promise.reject(new Error('a container profile installs no llama.cpp')),
      containers: {
        settings: {
          ...settingsSchema.parse({}).agent.containers,
          pull: 'never',
          ipc: 'private',
          shm_size_gb: 0.064,
        },
        nodeId: () => node,
      },
    });
    late.exec = exec;
    const model: ModelSpec = {
      name: 'm',
      source: gguf,
      replicas: 1,
      profiles: [
        {
          name: 'cpu',
          engine: 'llamacpp',
          cpu: true,
          tp: 1,
          pp: 1,
          gpus_per_node: 0,
          nodes: 1,
          args: [],
          env: { FAKE_LLAMA_LOAD_MS: '200' },
          adapters: [],
          runtime: 'container',
          image,
        },
      ],
    };
    const port = await freePort();
    const shard = {
      replica: 'm-1',
      model,
      profile: 'cpu',
      rank: 0,
      ranks: 1,
      port,
      devices: [],
      threads: 1,
      api_key: 'llmgw_engine_test',
    };
    const last = (): ShardStatusWire | undefined => {
      for (let i = sent.length - 1; i >= 0; i--) {
        const m = sent[i];
        if (m?.type === 'shards') return m.statuses.find((s) => s.key === 'm-1/0');
      }
      return undefined;
    };
    try {
      exec.handle({ type: 'assign', shards: [shard], engines: testEngines() });
      const ready = await until('the shard to be ready', () =>
        last()?.state === 'ready' ? last() : undefined,
      );
      expect(ready.restarts).toBe(0);
      const [container] = await listNodeContainers(client, node);
      expect(container?.labels).toMatchObject({
        'llmgw.shard': 'm-1/0',
        'llmgw.replica': 'm-1',
        'llmgw.node': node,
      });
      // The gateway's view: the engine answers on the node's address at the placed port.
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);

      exec.handle({ type: 'logs', request: 'r1', key: 'm-1/0', tail: 50, follow: false });
      const logs = await until('the logs', () =>
        sent.find((m): m is Extract<AgentMessage, { type: 'log_lines' }> => m.type === 'log_lines'),
      );
      expect(logs.error).toBeUndefined();
      expect(logs.lines.length).toBeGreaterThan(0);

      exec.handle({ type: 'assign', shards: [], engines: testEngines() });
      await until('the container to be gone', async () =>
        (await listNodeContainers(client, node)).length === 0 ? true : undefined,
      );
    } finally {
      await exec.stop();
    }
  }, 60_000);
});
