import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../../src/cli/gateway-compose.js';
import { fakeLlamaServer } from '../fakes/engines/fake-engines.js';
import { startDaemon, type Daemon } from '../support/cli.js';
import { api, startControlPlane, type TestControlPlane } from '../support/control-plane.js';
import { localModel } from '../support/local-model.js';
import { enginePorts, until } from '../support/fleet.js';
import { chaosReport, scaled } from './chaos.js';

/**
 * kill -9 the agent of the node that runs a model's only replica, under steady load through
 * the gateway, and start it again: it takes the engine over (same pid), and no request fails.
 * The agent is the real `llmgw agent` (built: npm run build:server), the engine the fake
 * llama-server.
 */

const noGpu = {
  LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
  LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
};
const clients = 4;
const kills = scaled(2, 10);
/** Load before each kill, and after each return. */
const loadMs = scaled(700, 3000);

interface Replica {
  id: string;
  state: string;
  restarts: number;
  shards: { pid?: number }[];
}

describe('chaos: kill -9 an agent under load and start it again', () => {
  let t: TestControlPlane;
  let dataDir: string;
  let agent: Daemon | undefined;

  beforeAll(async () => {
    const ports = await enginePorts();
    // The default heartbeat: a node is not ready (its replicas out of the routes) after three
    // missed ones, 15 s, and a restarted agent must be back before (it takes 2-6 s here).
    t = await startControlPlane({
      config: `agent:\n  heartbeat_ms: 5000\n  stop_grace_s: 2\n  engines:\n    llamacpp: {bin: ${fakeLlamaServer}}\nplacement:\n  ports: ${ports.first}-${ports.last}\n`,
    });
    // The gateway of the control plane's process, as `llmgw server` runs it: /v1 on its address.
    await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
    });
    dataDir = mkdtempSync(join(tmpdir(), 'llmgw-chaos-agent-'));
  });
  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await t.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const startAgent = async (token?: string) => {
    const d = startDaemon(
      [
        'agent',
        '--server',
        t.url,
        '--name',
        'chaos-node',
        ...(token === undefined ? [] : ['--token', token]),
      ],
      { LLMGW_DATA_DIR: dataDir, ...noGpu, FAKE_LLAMA_TOKEN_MS: '1' },
    );
    await d.waitFor(/joined the cluster|connected to the control plane/);
    return d;
  };
  const replica = async () =>
    ((await api(t.url, t.adminKey, 'GET', '/replicas?model=steady')).body.items as Replica[])[0];

  it('restarts no engine and fails no request', async () => {
    const token = (await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string;
    agent = await startAgent(token);
    const model = {
      name: 'steady',
      source: localModel(),
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, min_memory_gb: 0.1 }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', model)).status).toBe(201);
    const first = await until('steady ready', async () => {
      const r = await replica();
      return r?.state === 'ready' ? r : undefined;
    });
    const pid = first.shards[0]?.pid;
    expect(pid).toBeGreaterThan(0);
    const userKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'chaos-client' })).body
      .secret as string;

    const complete = (prompt: string) =>
      fetch(`${t.url}/v1/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${userKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'steady', prompt, max_tokens: 4 }),
      });
    // The gateway takes the replica into its routes on its next refresh: load starts once it has.
    await until('the gateway routes to steady', async () =>
      (await complete('warm up')).status === 200 ? true : undefined,
    );
    let running = true;
    let ok = 0;
    const failures: string[] = [];
    const client = async (n: number) => {
      for (let i = 0; running; i++) {
        try {
          const res = await complete(`client ${n} request ${i}`);
          const body = await res.text();
          if (res.status === 200) ok++;
          else failures.push(`${res.status} ${body.slice(0, 200)}`);
        } catch (e) {
          failures.push(String(e));
        }
      }
    };
    const load = Promise.all(Array.from({ length: clients }, (_, n) => client(n)));
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const pids = new Set<number>();
    let restartsSeen = 0;
    try {
      for (let k = 0; k < kills; k++) {
        await pause(loadMs);
        const current = agent;
        current.child.kill('SIGKILL');
        await current.stop('SIGKILL');
        agent = await startAgent();
        const back = await until('steady ready after the restart', async () => {
          const r = await replica();
          return r?.state === 'ready' ? r : undefined;
        });
        for (const s of back.shards) if (s.pid !== undefined) pids.add(s.pid);
        restartsSeen = Math.max(restartsSeen, back.restarts);
      }
      await pause(loadMs);
    } finally {
      running = false;
      await load;
    }
    const engineRestarts = [...pids].filter((p) => p !== pid).length + restartsSeen;
    const report = chaosReport(
      'agent-restart',
      { kills, clients, requests: ok + failures.length, ok },
      { failed_requests: failures.length, engine_restarts: engineRestarts },
    );
    expect(report).toContain('agent-restart');
    expect(failures.slice(0, 5)).toEqual([]);
    expect(engineRestarts).toBe(0);
    expect(ok).toBeGreaterThan(kills * clients);
  });
});
