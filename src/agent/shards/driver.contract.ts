import { afterEach, describe, expect, it } from 'vitest';

import { until } from '../../../test/support/timing.js';

import type { Instance } from './driver.js';
import type { ShardSupervisor, ShardSupervisorOptions } from './supervisor.js';
import type { ShardRun, ShardStatus } from './types.js';

/**
 * The shard lifecycle's contract, run against each driver (process/process-driver.test.ts,
 * container/container-driver.test.ts): the same cases, whatever runs the engine.
 */

/** One engine of the harness, as the driver's world sees it: a pid, a container id. */
export type EngineId = string;

export interface DriverHarness {
  /**
   * A run of a fake engine on `port` that answers health and writes `logLine` to its log;
   * `variant` changes what it runs (its hash), as a new version of the model would.
   */
  run(key: string, port: number, variant?: string): ShardRun;
  /** A line every engine of the harness writes to its log. */
  logLine: string;
  /**
   * A supervisor on this harness's node: every one made shares what the engines left (state
   * file, daemon labels), as a new agent of the same node does.
   */
  supervisor(options: Pick<ShardSupervisorOptions, 'onStatus' | 'onRemoved'>): ShardSupervisor<Instance>;
  /** The engine running for `key` now, if any. */
  engine(key: string): Promise<EngineId | undefined>;
  /** Whether that engine still runs. */
  running(id: EngineId): Promise<boolean>;
  /** Ends the engine from outside, as a crash does. */
  crash(id: EngineId): Promise<void>;
  /** Removes what no shard claims: the agent's release after its first assignment, the container sweep. */
  sweep(sup: ShardSupervisor<Instance>): Promise<void>;
  freePort(): Promise<number>;
}

/** `skip`: why this machine cannot run the harness's driver (no daemon), said in the skipped suite's name. */
export function driverContract(name: string, harness: () => DriverHarness, skip?: string): void {
  const title = `the shard lifecycle through the ${name} driver${skip === undefined ? '' : ` (skipped: ${skip})`}`;
  describe.skipIf(skip !== undefined)(title, () => {
    const made: ShardSupervisor<Instance>[] = [];
    afterEach(async () => {
      await Promise.all(made.splice(0).map((s) => s.stopAll()));
    });

    function supervise(h: DriverHarness) {
      const seen: ShardStatus[] = [];
      const removed: string[] = [];
      const sup = h.supervisor({ onStatus: (s) => seen.push(s), onRemoved: (k) => removed.push(k) });
      made.push(sup);
      const state = (key: string, want: ShardStatus['state']) =>
        until(`${key} ${want}`, () => {
          const s = sup.statuses().find((x) => x.key === key);
          return s?.state === want ? s : undefined;
        });
      return { sup, seen, removed, state };
    }

    it('starts an engine and tells it ready, with its pid and its log', async () => {
      const h = harness();
      const { sup, state } = supervise(h);
      sup.apply([h.run('c-ready/0', await h.freePort())]);
      const ready = await state('c-ready/0', 'ready');
      expect(ready.pid).toBeGreaterThan(0);
      expect(ready.restarts).toBe(0);
      await until('its log', () => sup.logs('c-ready/0').some((l) => l.includes(h.logLine)));
    });

    it('restarts a crashed engine after a backoff, saying when', async () => {
      const h = harness();
      const { sup, seen, state } = supervise(h);
      sup.apply([h.run('c-crash/0', await h.freePort())]);
      await state('c-crash/0', 'ready');
      const first = await h.engine('c-crash/0');
      if (first === undefined) throw new Error('no engine');
      await h.crash(first);
      const failed = await until('the failure', () =>
        seen.find((s) => s.key === 'c-crash/0' && s.state === 'failed'),
      );
      expect(failed.reason).toMatch(/restarting in \d/);
      expect(failed.restart_at).toBeDefined();
      const again = await state('c-crash/0', 'ready');
      expect(again.restarts).toBe(1);
      expect(await h.engine('c-crash/0')).not.toBe(first);
    });

    it('stops an engine no longer wanted, and forgets its shard once it is gone', async () => {
      const h = harness();
      const { sup, removed, state } = supervise(h);
      sup.apply([h.run('c-stop/0', await h.freePort())]);
      await state('c-stop/0', 'ready');
      const id = await h.engine('c-stop/0');
      if (id === undefined) throw new Error('no engine');
      sup.apply([]);
      expect(sup.statuses().find((s) => s.key === 'c-stop/0')?.state).toBe('stopping');
      await sup.stopped();
      expect(removed).toEqual(['c-stop/0']);
      expect(sup.statuses()).toEqual([]);
      expect(await h.running(id)).toBe(false);
    });

    it('is taken over by the next supervisor when it runs the same run, without a restart', async () => {
      const h = harness();
      const run = h.run('c-adopt/0', await h.freePort());
      const first = supervise(h);
      first.sup.apply([run]);
      await first.state('c-adopt/0', 'ready');
      const id = await h.engine('c-adopt/0');
      await first.sup.detach();
      if (id === undefined) throw new Error('no engine');
      expect(await h.running(id)).toBe(true);
      const next = supervise(h);
      await until('the engine waiting to be claimed', () => next.sup.unclaimed().includes('c-adopt/0'));
      next.sup.apply([run]);
      const ready = await next.state('c-adopt/0', 'ready');
      expect(ready.restarts).toBe(0);
      expect(await h.engine('c-adopt/0')).toBe(id);
    });

    it('replaces what an earlier agent left for a run that changed, once it is gone', async () => {
      const h = harness();
      const port = await h.freePort();
      const first = supervise(h);
      first.sup.apply([h.run('c-stale/0', port)]);
      await first.state('c-stale/0', 'ready');
      const old = await h.engine('c-stale/0');
      await first.sup.detach();
      if (old === undefined) throw new Error('no engine');
      const next = supervise(h);
      next.sup.apply([h.run('c-stale/0', port, 'v2')]);
      await next.state('c-stale/0', 'ready');
      expect(await h.running(old)).toBe(false);
      expect(await h.engine('c-stale/0')).not.toBe(old);
    });

    it('removes an engine an earlier agent left that no shard claims', async () => {
      const h = harness();
      const first = supervise(h);
      first.sup.apply([h.run('c-orphan/0', await h.freePort())]);
      await first.state('c-orphan/0', 'ready');
      const id = await h.engine('c-orphan/0');
      await first.sup.detach();
      if (id === undefined) throw new Error('no engine');
      const next = supervise(h);
      next.sup.apply([]);
      await h.sweep(next.sup);
      await next.sup.stopped();
      await until('the orphan gone', async () => !(await h.running(id)));
    });
  });
}
