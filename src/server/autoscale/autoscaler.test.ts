import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ModelSpec } from '../../catalog/model-spec.js';
import type { GatewayLoadReport } from '../../protocol/load-report.js';
import type { RolloutView } from '../../protocol/rollout-views.js';
import { openSqliteStore } from '../../store/sqlite/sqlite-store.js';
import type { Store } from '../../store/store.js';

import { Autoscaler, sharedLoadKey, type ScaledFleet } from './autoscaler.js';

const settings = { interval_s: 60, scale_down_window_s: 1, scale_up_step: 4, report_ttl_s: 5 };
const spec: ModelSpec = {
  name: 'm',
  source: '/models/m.gguf',
  replicas: 1,
  autoscale: { min: 1, max: 3, target: 0.5, idle_s: 60 },
  profiles: [],
};
const busy = (gateway: string): GatewayLoadReport => ({
  gateway,
  at: Date.now(),
  models: [
    {
      model: 'm',
      queued: 6,
      inFlight: 4,
      requests: 10,
      lastRequestAt: Date.now(),
      replicas: [{ id: 'm-1', running: 4, waiting: 0, capacity: 4, inFlight: 4, stale: false }],
    },
  ],
});

/** Fleet as much as the autoscaler asks of it: who leads, and whether the model rolls. */
function fleet(leads: boolean, rolling = false): ScaledFleet & { pokes: number } {
  return {
    leads,
    pokes: 0,
    poke() {
      this.pokes++;
    },
    settled: () => Promise.resolve(),
    replicas: () => [],
    rollout: () => Promise.resolve(rolling ? ({ state: 'rolling' } as RolloutView) : undefined),
  };
}

/** Two control planes on one store (as on PostgreSQL), the leader and a follower. */
describe('the autoscaler with several control planes', () => {
  let dir: string;
  let store: Store;
  const make = (id: string, f: ScaledFleet) =>
    new Autoscaler({
      store,
      specs: () => Promise.resolve([spec]),
      fleet: f,
      settings: () => settings,
      logger: pino({ level: 'silent' }),
      controlPlaneId: id,
      shared: true,
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-autoscaler-'));
    store = await openSqliteStore({ path: join(dir, 'llmgw.db') });
    const at = new Date().toISOString();
    for (const id of ['cp-a', 'cp-b'])
      await store.cluster.announce({ id, url: `http://${id}`, version: 'test', started_at: at, seen_at: at });
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a follower shares its gateways’ reports through the store; the leader decides on them, stores and audits', async () => {
    const leaderFleet = fleet(true);
    const leader = make('cp-a', leaderFleet);
    const follower = make('cp-b', fleet(false));
    await follower.report(busy('gw-on-b'));
    await follower.tick();
    const shared = JSON.parse(
      (await store.cluster.state(sharedLoadKey('cp-b'))) ?? '[]',
    ) as GatewayLoadReport[];
    expect(shared.map((r) => r.gateway)).toEqual(['gw-on-b']);

    expect(leader.countOf(spec)).toBe(1);
    await leader.tick();
    // (1 + 6/4) / 0.5 = 5 wanted, held to max 3.
    expect(leader.countOf(spec)).toBe(3);
    expect(leaderFleet.pokes).toBe(1);
    expect(await store.scale.get('m')).toMatchObject({
      replicas: 3,
      decision: { from: 1, to: 3, direction: 'up', figures: { queued: 6, desired: 3 } },
    });
    const [entry] = await store.audit.list({ action: 'model.scale' });
    expect(entry).toMatchObject({ actor: 'system', target: 'model/m', detail: { from: 1, to: 3 } });
    const metrics = await leader.metrics.metrics();
    expect(metrics).toContain('llmgw_autoscaler_decisions_total{model="m",direction="up"} 1');
    expect(metrics).toContain('llmgw_model_replicas_desired{model="m"} 3');

    // The follower reads the leader's count on its pass.
    await follower.tick();
    expect(follower.countOf(spec)).toBe(3);
  });

  it('holds the count while the model rolls, and refuses a wake of a model that never scales to zero', async () => {
    const rolling = make('cp-a', fleet(true, true));
    await rolling.start();
    await rolling.report({ ...busy('gw-a'), models: [{ ...busy('gw-a').models[0]!, queued: 100 }] });
    await rolling.tick();
    expect(rolling.countOf({ ...spec, autoscale: { ...spec.autoscale!, max: 10 } })).toBe(3);
    expect(await rolling.wake('m')).toEqual({
      ok: false,
      reason: 'model m has autoscale min 1, so it is never scaled to zero',
    });
    await rolling.stop();
  });
});
