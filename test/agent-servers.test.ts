import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { parseServers } from '../src/cli/agent-command.js';
import { fakeLlamaServer, freePort } from './fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { localModel } from './support/local-model.js';
import { enginePorts, until } from './support/fleet.js';
import { createTempDatabase, type TempDatabase } from './support/postgres.js';

const heartbeatMs = 150;

describe('agent --server with several control planes', () => {
  it('takes each http(s) URL of the list, and names the one that is not', () => {
    expect(parseServers('http://cp1:8080, https://cp2:8443/')).toEqual([
      'http://cp1:8080',
      'https://cp2:8443/',
    ]);
    expect(() => parseServers('http://cp1:8080,cp2:8080')).toThrow(
      '--server cp2:8080 is not a URL: write http://HOST:8080',
    );
    expect(() => parseServers('http://cp1:8080,ftp://cp2')).toThrow(
      '--server ftp://cp2 is not a URL: write http://HOST:8080',
    );
    expect(() => parseServers('http://cp1:8080,,http://cp2:8080')).toThrow(
      '--server http://cp1:8080,,http://cp2:8080 has an empty address: separate control planes with single commas, as in http://cp1:8080,http://cp2:8080',
    );
    expect(() => parseServers(' ')).toThrow(
      'give the control plane: llmgw agent --server http://HOST:8080 --token TOKEN',
    );
  });

  it('joins the control plane that answers when the first address is dead', async () => {
    const t = await startControlPlane({ config: `agent:\n  heartbeat_ms: ${heartbeatMs}\n` });
    const dead = `http://127.0.0.1:${await freePort()}`;
    let a: TestAgent | undefined;
    try {
      a = await startTestAgent(t, 'second-address', [], { servers: [dead, t.url] });
      expect(a.agent.server).toBe(t.url);
      const node = await api(t.url, t.adminKey, 'GET', '/nodes/second-address');
      expect(node.body.state).toBe('ready');
    } finally {
      await a?.stop();
      await t.stop();
    }
  });
});

describe('an agent of two control planes on one PostgreSQL database', () => {
  let db: TempDatabase;
  let first: TestControlPlane;
  let second: TestControlPlane;
  const adminKey = 'servers-admin-key-0123456789abcdef';
  // Control planes on one database share the secret their engine keys are sealed with.
  const env = { LLMGW_ENGINE_KEY_SECRET: 'servers-engine-key-secret-0123456789abcdef' };

  beforeAll(async () => {
    db = await createTempDatabase();
    const ports = await enginePorts();
    const config = [
      'agent:',
      `  heartbeat_ms: ${heartbeatMs}`,
      '  engines:',
      `    llamacpp: {bin: ${fakeLlamaServer}}`,
      'placement:',
      `  ports: ${ports.first}-${ports.last}`,
      '',
    ].join('\n');
    first = await startControlPlane({ database: db.url, adminKey, env, config });
    second = await startControlPlane({ database: db.url, adminKey, env, config });
  });
  afterAll(async () => {
    await first.stop().catch(() => undefined);
    await second.stop();
    await db.drop();
  });

  it('moves to the other when its control plane stops, and its engine keeps running (same pid)', async () => {
    const model = {
      name: 'mover',
      source: localModel(),
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, min_memory_gb: 0.1 }],
    };
    expect((await api(first.url, adminKey, 'POST', '/models', model)).status).toBe(201);
    const a = await startTestAgent(first, 'mover-node', [], { servers: [first.url, second.url] });
    try {
      const ready = await until('the replica ready on the first control plane', async () => {
        const items = (await api(first.url, adminKey, 'GET', '/replicas?model=mover')).body.items as {
          state: string;
          shards: { pid?: number }[];
        }[];
        return items.find((r) => r.state === 'ready');
      });
      const pid = ready.shards[0]?.pid;
      expect(pid).toBeGreaterThan(0);
      expect(a.agent.server).toBe(first.url);

      await first.stop();
      await until('connected to the second control plane', () =>
        second.cp.registry.isConnected(a.agent.identity.id) ? true : undefined,
      );
      expect(a.agent.server).toBe(second.url);
      const after = await until('the replica ready on the second control plane', async () => {
        const items = (await api(second.url, adminKey, 'GET', '/replicas?model=mover')).body.items as {
          state: string;
          shards: { pid?: number }[];
        }[];
        return items.find((r) => r.state === 'ready');
      });
      expect(after.shards[0]?.pid).toBe(pid);
      // Still the same process a while later: the second control plane's assignment changed nothing.
      await new Promise((r) => setTimeout(r, 1000));
      const [status] = a.supervisor.statuses();
      expect(status).toMatchObject({ state: 'ready', pid, restarts: 0 });
    } finally {
      await a.stop();
    }
  });
});
