import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Agent, AgentRefused } from '../src/agent/agent.js';
import type { NodeInventory } from '../src/gpu/types.js';

import { dialAgentChannel } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { a100, inventoryWith, migA100 } from './support/inventory.js';
import { until } from './support/timing.js';

const quiet = pino({ level: 'silent' });
const heartbeatMs = 150;

describe('agents joining a control plane', () => {
  let t: TestControlPlane;
  const agents: Agent[] = [];

  const token = async (body: Record<string, unknown> = {}) =>
    (await api(t.url, t.adminKey, 'POST', '/node-tokens', body)).body.secret as string;
  const node = async (name: string) => (await api(t.url, t.adminKey, 'GET', `/nodes/${name}`)).body;
  const agent = (o: {
    token?: string;
    name?: string;
    dataDir?: string;
    inventory?: () => Promise<NodeInventory>;
  }) => {
    const a = new Agent({
      server: t.url,
      token: o.token,
      name: o.name,
      dataDir: o.dataDir ?? mkdtempSync(join(tmpdir(), 'llmgw-agent-')),
      logger: quiet,
      inventory: o.inventory ?? (() => Promise.resolve(inventoryWith([a100(0), a100(1)]))),
      backoff: { initialMs: 20, maxMs: 200 },
    });
    agents.push(a);
    return a;
  };

  beforeAll(async () => {
    t = await startControlPlane({ config: `agent:\n  heartbeat_ms: ${heartbeatMs}\n` });
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await t.stop();
  });

  it('joins with a token, is listed ready with its devices, and keeps its own credential', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-'));
    const a = agent({ token: await token({ name: 'first' }), name: 'gpu-1', dataDir });
    void a.run();
    const identity = await a.joined;
    expect(identity.credential).toMatch(/^llmgw_node_/);
    const saved = join(dataDir, 'agent', 'node.json');
    expect(JSON.parse(readFileSync(saved, 'utf8'))).toMatchObject({ name: 'gpu-1', server: t.url });
    expect(statSync(saved).mode & 0o077).toBe(0);
    const view = await node('gpu-1');
    expect(view).toMatchObject({ name: 'gpu-1', state: 'ready', devices_by_class: { 'a100-80g': 2 } });
    expect(view.devices.map((d: { label: string }) => d.label)).toEqual(['0', '1']);
    const tokens = await api(t.url, t.adminKey, 'GET', '/node-tokens');
    expect(tokens.body.items.find((x: { name: string }) => x.name === 'first').uses).toBe(1);
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=node/gpu-1');
    expect(audit.body.items[0]).toMatchObject({ action: 'node.join', actor: 'token/first' });

    // Restarted without the token, it comes back as the same node on its credential.
    await a.stop();
    const again = agent({ dataDir });
    void again.run();
    expect((await again.joined).id).toBe(identity.id);
    expect(
      (await api(t.url, t.adminKey, 'GET', '/nodes')).body.items.filter(
        (n: { name: string }) => n.name === 'gpu-1',
      ),
    ).toHaveLength(1);
    await again.stop();
  });

  it('is marked not ready after missed heartbeats, with when it was last seen, and ready again when it returns', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-'));
    const a = agent({ token: await token(), name: 'flaky', dataDir });
    void a.run();
    await a.joined;
    await a.stop();
    const down = await until('not ready', async () => {
      const v = await node('flaky');
      return v.state === 'not_ready' ? v : undefined;
    });
    expect(down.reason).toMatch(/^no heartbeat since \d{4}-\d\d-\d\dT[\d:.]+Z: its agent disconnected/);
    const back = agent({ dataDir });
    void back.run();
    await until('ready again', async () => ((await node('flaky')).state === 'ready' ? true : undefined));
  });

  it('sends a new inventory when the machine changes, and reports telemetry between', async () => {
    let inv = inventoryWith([a100(0)]);
    const a = agent({ token: await token(), name: 'changing', inventory: () => Promise.resolve(inv) });
    void a.run();
    await a.joined;
    inv = inventoryWith([a100(0, { memory_used_mib: 4242, temperature_c: 71 })]);
    await until('telemetry', async () =>
      (await node('changing')).devices[0]?.memory_used_mib === 4242 ? true : undefined,
    );
    inv = inventoryWith([migA100(0, ['3g.40gb', '3g.40gb'])]);
    const v = await until('MIG layout', async () => {
      const n = await node('changing');
      return n.devices_by_class['a100-80g-mig-3g.40gb'] === 2 ? n : undefined;
    });
    expect(v.devices.map((d: { label: string; id: number }) => `${d.id}=${d.label}`)).toEqual([
      '1000=0/mig0',
      '1001=0/mig1',
    ]);
    const stored = await t.cp.store.nodes.getByName('changing');
    expect(stored?.inventory.gpu.cards[0]?.mig?.current).toBe(true);
  });

  it('logs a refused agent with its node name cut and redacted', async () => {
    const secret = 'llmgw_key_ThisIsAnApiKeySentAsANodeName0001';
    const name = `${secret}${'n'.repeat(8000)}`;
    const { status } = await dialAgentChannel(t.url, {
      authorization: 'Bearer llmgw_join_notarealtokennotarealtoken00',
      'x-llmgw-node-name': name,
    });
    expect(status).toBe(400);
    const line = await until('the refusal logged', () =>
      Promise.resolve(
        t
          .logs()
          .split('\n')
          .find((l) => l.includes('agent refused')),
      ),
    );
    expect(line).not.toContain(secret);
    expect(line).not.toContain('n'.repeat(1000));
    expect(line).toContain(`(${name.length} characters)`);
  });

  it('refuses a bad, a revoked and an expired token with a clear message, storing nothing', async () => {
    const bad = agent({ token: 'llmgw_join_notarealtokennotarealtoken00', name: 'intruder' });
    await expect(bad.run()).rejects.toThrow(
      'the join token is not valid: check it was copied whole, or make a new one with llmgw ctl node token',
    );
    const revoked = await token({ name: 'soon-revoked' });
    await api(t.url, t.adminKey, 'DELETE', '/node-tokens/soon-revoked');
    await expect(agent({ token: revoked, name: 'late' }).run()).rejects.toThrow(
      /the join token "soon-revoked" was revoked at .*: make a new one with llmgw ctl node token/,
    );
    const expiring = await token({ name: 'expiring', expires_in: 60 });
    // Age it: move its expiry into the past.
    const row = await t.cp.store.joinTokens.list();
    expect(row.find((x) => x.name === 'expiring')?.expires_at).not.toBeNull();
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(t.cp.settings.current.settings.database.slice('sqlite:'.length));
    db.prepare(
      "update join_tokens set expires_at = '2020-01-01T00:00:00.000Z' where name = 'expiring'",
    ).run();
    db.close();
    const e = await agent({ token: expiring, name: 'tardy' })
      .run()
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AgentRefused);
    expect((e as Error).message).toBe(
      'the join token "expiring" expired at 2020-01-01T00:00:00.000Z: make a new one with llmgw ctl node token',
    );
    for (const name of ['intruder', 'late', 'tardy'])
      expect((await api(t.url, t.adminKey, 'GET', `/nodes/${name}`)).status).toBe(404);
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?action=node.join&limit=100');
    expect(audit.body.items.map((x: { target: string }) => x.target)).not.toContain('node/intruder');
  });

  it('refuses a second machine under a name that is taken', async () => {
    const first = agent({ token: await token(), name: 'twin' });
    void first.run();
    await first.joined;
    const second = agent({ token: await token(), name: 'twin' });
    await expect(second.run()).rejects.toThrow(
      'a node named "twin" has already joined with another identity: remove it first (llmgw ctl node rm twin) or start this agent with --name OTHER',
    );
  });

  it('joins again with its token when its node was removed, and is refused without one', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-'));
    const tok = await token();
    const a = agent({ token: tok, name: 'removable', dataDir });
    void a.run();
    const first = await a.joined;
    expect((await api(t.url, t.adminKey, 'DELETE', '/nodes/removable')).status).toBe(200);
    // Same agent, still holding the token: it rejoins under the same identity.
    await until('rejoined', async () =>
      (await api(t.url, t.adminKey, 'GET', '/nodes/removable')).status === 200 ? true : undefined,
    );
    expect((await node('removable')).id).toBe(first.id);
    await a.stop();
    await api(t.url, t.adminKey, 'DELETE', '/nodes/removable');
    const noToken = agent({ dataDir });
    await expect(noToken.run()).rejects.toThrow(/credential is not valid here|has not joined/);
  });

  it('counts devices by class in the cluster status', async () => {
    const s = await api(t.url, t.adminKey, 'GET', '/status');
    expect(s.status).toBe(200);
    expect(s.body.nodes.total).toBeGreaterThan(0);
    const a100s = s.body.devices.find((d: { class: string }) => d.class === 'a100-80g');
    expect(a100s.total).toBeGreaterThanOrEqual(2);
    expect(Number(a100s.free) + Number(a100s.used)).toBe(a100s.total);
  });
});

describe('an agent when the control plane goes away', () => {
  it('reconnects with backoff when the control plane comes back, as the same node', async () => {
    // Its data dir is new each start here: the engine-key secret comes from the environment.
    const env = { LLMGW_ENGINE_KEY_SECRET: 'survivor-engine-key-secret-0123456789abcdef' };
    const t1 = await startControlPlane({ config: `agent:\n  heartbeat_ms: ${heartbeatMs}\n`, env });
    const port = new URL(t1.url).port;
    const tok = (await api(t1.url, t1.adminKey, 'POST', '/node-tokens', {})).body.secret;
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-'));
    const a = new Agent({
      server: t1.url,
      token: tok,
      dataDir,
      name: 'survivor',
      logger: quiet,
      inventory: () => Promise.resolve(inventoryWith([])),
      backoff: { initialMs: 20, maxMs: 200 },
    });
    void a.run();
    const id = (await a.joined).id;
    // Same database, same port: as a control plane restarted by systemd.
    const db = t1.cp.settings.current.settings.database;
    await t1.cp.stop();
    const t2 = await startControlPlane({
      config: `agent:\n  heartbeat_ms: ${heartbeatMs}\n`,
      listen: `127.0.0.1:${port}`,
      database: db,
      adminKey: 'x'.repeat(32),
      env,
    });
    try {
      const v = await until('reconnected', async () => {
        const r = await fetch(`http://127.0.0.1:${port}/api/v1/nodes/survivor`, {
          headers: { authorization: `Bearer ${'x'.repeat(32)}` },
        });
        const body = (await r.json()) as { state?: string; id?: string };
        return body.state === 'ready' && t2.cp.registry.isConnected(id) ? body : undefined;
      });
      expect(v.id).toBe(id);
    } finally {
      await a.stop();
      await t2.stop();
    }
  });
});
