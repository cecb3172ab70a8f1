import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ControlPlaneView } from '../src/protocol/node-views.js';
import { openStore } from '../src/store/open.js';
import type { Store } from '../src/store/store.js';

import { fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { fakeLlamaSettings, until } from './support/fleet.js';
import { createTempDatabase, type TempDatabase } from './support/postgres.js';
import { localModel } from './support/local-model.js';

// Issue 14 item 1: control planes on one PostgreSQL database serve together; one leads
// (places), elected by a lease whose token fences its writes; another takes over when it goes.

const adminKey = 'ha-test-admin-key-0123456789abcdef';
const engineKeySecret = 'ha-test-engine-key-secret-0123456789abcdef';

describe('two control planes on one PostgreSQL database', () => {
  let db: TempDatabase;
  let dir = '';
  let config = '';
  let source = '';
  const cps: TestControlPlane[] = [];
  const agents: TestAgent[] = [];
  let probe: Store;

  const start = () =>
    startControlPlane({
      config,
      database: db.url,
      adminKey,
      env: { LLMGW_ENGINE_KEY_SECRET: engineKeySecret },
    });
  const status = async (t: TestControlPlane) =>
    (await api(t.url, adminKey, 'GET', '/status')).body.control_planes as ControlPlaneView[];
  const leaderOf = async (t: TestControlPlane) => (await status(t)).find((c) => c.leader);
  const byId = (id: string) => cps.find((t) => t.cp.leadership.id === id);
  const readyOn = (t: TestControlPlane, model: string, n: number) =>
    until(
      `${n} ready replicas of ${model} seen by ${t.cp.leadership.id}`,
      () => {
        const all = t.cp.fleet.replicas(model);
        const list = all.filter((r) => r.state === 'ready');
        if (list.length === n) return list;
        // Said when it times out: what each replica was doing, and whether this one leads.
        throw new Error(
          `leads=${t.cp.fleet.leads}; ${all.map((r) => `${r.id ?? 'pending'} ${r.state} ${r.reason ?? ''}`).join('; ')}`,
        );
      },
      // Under the test's own 60 s, so that a wait too long says what each replica was doing.
      40_000,
    );

  beforeAll(async () => {
    db = await createTempDatabase();
    dir = mkdtempSync(join(tmpdir(), 'llmgw-ha-'));
    source = localModel(dir);
    const bin = join(dir, 'llama-server');
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`);
    chmodSync(bin, 0o755);
    config = await fakeLlamaSettings(bin, ['ha: {lease_s: 3}']);
    cps.push(await start());
    cps.push(await start());
    probe = await openStore(db.url);
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    for (const t of cps) await t.stop().catch(() => undefined);
    await probe.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('shows both in ctl status, one of them leading, the same one to each', async () => {
    const [a, b] = cps as [TestControlPlane, TestControlPlane];
    const seenByA = await status(a);
    const seenByB = await status(b);
    expect(seenByA.map((c) => c.id).sort()).toEqual([a.cp.leadership.id, b.cp.leadership.id].sort());
    expect(seenByA.filter((c) => c.leader)).toHaveLength(1);
    expect(seenByA.find((c) => c.leader)?.id).toBe(seenByB.find((c) => c.leader)?.id);
    expect(seenByA.find((c) => c.self)?.id).toBe(a.cp.leadership.id);
    expect(seenByB.find((c) => c.self)?.id).toBe(b.cp.leadership.id);
    expect(seenByA[0]).toMatchObject({ leader: true, state: 'serving', term: expect.any(Number) });
    expect([a, b].filter((t) => t.cp.fleet.leads)).toHaveLength(1);
  });

  it("places a model added through the follower, runs it on the follower's agent, and routes to it from both", async () => {
    const leader = byId((await leaderOf(cps[0]!))!.id)!;
    const follower = cps.find((t) => t !== leader)!;
    agents.push(await startTestAgent(follower, 'node-f'));
    const added = await api(follower.url, adminKey, 'POST', '/models', {
      name: 'm',
      source,
      replicas: 1,
      context_length: 2048,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    const [onFollower] = await readyOn(follower, 'm', 1);
    // The leader hears the agent's report through the store, as the follower heard it.
    const [onLeader] = await readyOn(leader, 'm', 1);
    expect(onLeader?.id).toBe(onFollower?.id);
    // A node's logs are read through the control plane its agent talks to: the other says which.
    // The leader hears of node-f through the store only (its heartbeats as the follower flushes
    // them, read back on the leader's reload): on a loaded machine it may hold the node not
    // ready for a moment, and then rightly says only that it is not connected here. The answer
    // is judged when the leader held node-f ready all the while it answered.
    let changes = 0;
    leader.cp.registry.onStateChange((name) => (changes += name === 'node-f' ? 1 : 0));
    const logs = await until('an answer of the leader while it holds node-f ready', async () => {
      const state = leader.cp.registry.view('node-f')?.state;
      if (state !== 'ready') throw new Error(`the leader holds node-f ${state}`);
      const before = changes;
      const r = await api(leader.url, adminKey, 'GET', `/replicas/${onFollower?.id}/logs`);
      return changes === before ? r : undefined;
    });
    expect(logs.status).toBe(409);
    expect(logs.body.error.message).toBe(
      `node node-f's agent is connected to control plane ${follower.cp.leadership.id}, not this one: read the logs of replica ${onFollower?.id} through that one (llmgw ctl status lists the control planes and their URLs)`,
    );
    for (const t of [leader, follower]) {
      const routes = await t.cp.fleet.routeTable();
      expect(routes.replicas.map((r) => r.id)).toEqual([onFollower?.id]);
      expect(routes.replicas[0]?.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    }
  });

  it('hands the lead over when the leader stops, within a lease, and no engine restarts', async () => {
    const leaderId = (await leaderOf(cps[0]!))!.id;
    const leader = byId(leaderId)!;
    const other = cps.find((t) => t !== leader)!;
    const pid = other.cp.fleet.replicas('m')[0]?.shards[0]?.pid;
    expect(pid).toBeGreaterThan(0);
    const stoppedAt = Date.now();
    await leader.stop();
    cps.splice(cps.indexOf(leader), 1);
    await until('the other control plane to lead', () => (other.cp.fleet.leads ? true : undefined), 10_000);
    expect(Date.now() - stoppedAt).toBeLessThan(4000);
    const now = await status(other);
    expect(now.map((c) => [c.id, c.leader])).toEqual([[other.cp.leadership.id, true]]);
    // The new leader places: a second replica of m.
    const grown = await api(other.url, adminKey, 'PATCH', '/models/m', { replicas: 2 });
    expect(grown.status, JSON.stringify(grown.body)).toBe(200);
    await readyOn(other, 'm', 2);
    expect(other.cp.fleet.replicas('m').map((r) => r.shards[0]?.pid)).toContain(pid);
    cps.push(await start());
  });

  it('refuses the writes of a leader whose lease another took, and it stops leading', async () => {
    const leader = cps.find((t) => t.cp.fleet.leads)!;
    const leadership = leader.cp.leadership;
    const stale = leadership.fence()!;
    expect(stale.holder).toBe(leadership.id);
    // An intruder takes the lease behind the leader's back, and the leader has not noticed
    // (stalled past its lease: a long pause, a frozen VM): it still believes it leads.
    const intruder = new pg.Client({ connectionString: db.url });
    await intruder.connect();
    await intruder.query(
      "update leases set holder = 'intruder', token = token + 1, expires_at = $1 where name = 'leader'",
      [new Date(Date.now() + 60_000).toISOString()],
    );
    // Its own renewal (every third of the lease) may notice the intruder first, stepping
    // down before the write below is tried: the refusal of the fenced write is what is
    // checked, as the fleet tells it to the leadership, whichever came first.
    const refusals: string[] = [];
    const lost = leadership.lost.bind(leadership);
    const believes = Object.assign(leadership, {
      leads: () => true,
      fence: () => stale,
      lost: (why: string) => {
        refusals.push(why);
        lost(why);
      },
    });
    const replicasBefore = (await probe.fleet.replicas()).length;
    // Two CPU replicas fill the one node: the change is one fewer, a removal to write.
    await probe.models.update('m', (m) => ({ ...m.spec, replicas: 1 }), {
      actor: 'admin',
      action: 'model.update',
    });
    await leader.cp.fleet.reconcile();
    // The store refused it: nothing written, and the leader stepped down.
    expect((await probe.fleet.replicas()).length).toBe(replicasBefore);
    // Once or more: a placement its own stepping down set going also believes it leads.
    expect(refusals.length).toBeGreaterThan(0);
    for (const why of refusals)
      expect(why).toContain(
        `this control plane (${stale.holder}, term ${stale.token}) no longer holds the leader lease: intruder holds it now (term ${stale.token + 1}`,
      );
    delete (believes as Partial<typeof believes>).leads;
    delete (believes as Partial<typeof believes>).fence;
    delete (believes as Partial<typeof believes>).lost;
    expect(leader.cp.fleet.leads).toBe(false);
    expect(cps.some((t) => t.cp.fleet.leads)).toBe(false);
    // The intruder gone, a real control plane leads again and removes the replica.
    await intruder.query("update leases set expires_at = $1 where name = 'leader'", [
      new Date(0).toISOString(),
    ]);
    await intruder.end();
    await until(
      'a control plane to lead again',
      () => (cps.some((t) => t.cp.fleet.leads) ? true : undefined),
      10_000,
    );
    await until('one replica of m left', async () =>
      (await probe.fleet.replicas()).length === 1 ? true : undefined,
    );
  });
});
