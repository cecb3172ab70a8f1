/**
 * A reconnect storm: every agent of a fleet dials one control plane at once, first to join
 * (with a token), then again with their node credentials after the control plane restarts,
 * as they do after an upgrade or a crash. All must be in within 30 s, none reset by an
 * overflowing accept queue. The agents are bench/sim-agents.mjs (the agents bench's), each
 * dialling from a loopback address of its own, retrying as `llmgw agent` does.
 */
import { rmSync } from 'node:fs';

import { afterEach, describe, expect, it } from 'vitest';

import { backoffDelay } from '../../src/agent/backoff.js';
import { failuresOf, startSimAgents, waitAllJoined, type SimAgent } from '../../bench/sim-agents.mjs';
import { api, startControlPlane, type TestControlPlane } from '../support/control-plane.js';

import { chaosReport, scaled } from './chaos.js';

const agents = scaled(300, 1000);
const deadlineMs = 30_000;
const adminKey = 'storm-admin-key-0123456789abcdefghij';
// One secret for both starts, as one data dir would give them.
const env = { LLMGW_ENGINE_KEY_SECRET: 'storm-engine-key-secret-0123456789abcdef' };
const retryDelay = (attempt: number) => backoffDelay(attempt, { initialMs: 500, maxMs: 30_000 });

let sims: SimAgent[] = [];
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const a of sims) a.stop();
  sims = [];
  for (const stop of stops.splice(0).reverse()) await stop();
});

describe('reconnect storm', () => {
  it(`${agents} agents join at once, and reconnect at once after a restart: all in within 30 s, none reset`, async () => {
    const t1 = await startControlPlane({ adminKey, env });
    const restarted: { t2?: TestControlPlane } = {};
    stops.push(async () => {
      if (restarted.t2 === undefined) {
        await t1.stop();
        return;
      }
      await restarted.t2.stop();
      rmSync(t1.dir, { recursive: true, force: true });
    });
    const secret = (await api(t1.url, adminKey, 'POST', '/node-tokens', { name: 'storm' })).body
      .secret as string;

    const joinStart = performance.now();
    sims = startSimAgents({ url: t1.url, secret, count: agents, retryDelay, loopbackSources: true });
    const joined = await waitAllJoined(sims, { since: joinStart, deadlineMs });
    const joinFailures = failuresOf(sims);
    expect(joined.missing.map((a) => `${a.name}: ${a.lastFailure ?? 'no answer'}`)).toEqual([]);
    expect(t1.cp.registry.views().filter((v) => v.state === 'ready')).toHaveLength(agents);

    // The same database and port: a control plane restarted by systemd.
    const port = new URL(t1.url).port;
    const database = t1.cp.settings.current.settings.database;
    await t1.cp.stop();
    await t1.hub.close();
    const restartAt = performance.now();
    const t2 = await startControlPlane({ adminKey, env, database, listen: `127.0.0.1:${port}` });
    restarted.t2 = t2;
    const back = await waitAllJoined(sims, { since: restartAt, deadlineMs });
    const after = failuresOf(sims);
    expect(back.missing.map((a) => `${a.name}: ${a.lastFailure ?? 'no answer'}`)).toEqual([]);
    // Back with their credentials: no node joined twice.
    expect(sims.every((a) => a.credential !== undefined && a.fatal === undefined)).toBe(true);
    expect((await t2.cp.store.nodes.list()).length).toBe(agents);

    const resets = after.reset;
    chaosReport(
      'reconnect-storm',
      {
        agents,
        join_s: (joined.lastJoinMs / 1000).toFixed(1),
        reconnect_s: (back.lastJoinMs / 1000).toFixed(1),
        refused_while_down: after.refused - joinFailures.refused,
        timed_out: after.timeout,
      },
      { resets, missing: joined.missing.length + back.missing.length },
    );
    expect(resets).toBe(0);
    expect(joined.lastJoinMs).toBeLessThan(deadlineMs);
    expect(back.lastJoinMs).toBeLessThan(deadlineMs);
  }, 120_000);
});
