import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { freePort } from '../../../../test/fakes/engines/fake-engines.js';
import type { ProcessSpec } from '../../../engines/types.js';
import { backoffMs } from '../restart-backoff.js';
import { Supervisor, type SupervisorOptions } from './process-supervisor.js';
import type { ShardRun, ShardStatus } from '../types.js';
import { until } from '../../../../test/support/timing.js';

// A failed shard says, structurally, when its supervisor starts it again (`restart_at`): the
// control plane tells from it a replica coming back from one that is down. Real child processes.

const supervisors: Supervisor[] = [];
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll()));
});

/** A status as reported, and when. */
type Seen = ShardStatus & { seen: number };

function harness(options: Partial<SupervisorOptions> = {}): { sup: Supervisor; events: Seen[] } {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-restart-at-'));
  const events: Seen[] = [];
  const sup = new Supervisor({
    logDir: join(dir, 'logs'),
    onStatus: (s) => events.push({ ...s, seen: Date.now() }),
    onRemoved: () => undefined,
    backoff: { initialMs: 300, maxMs: 2000 },
    healthIntervalMs: 40,
    readyHealthIntervalMs: 40,
    settleMs: 100,
    ...options,
  });
  supervisors.push(sup);
  return { sup, events };
}

function node(script: string): ProcessSpec {
  return { name: 'script', bin: process.execPath, args: ['-e', script], env: {} };
}

function shard(key: string, processes: ProcessSpec[], extra: Partial<ShardRun> = {}): ShardRun {
  return { key, replica: key.split('/')[0] ?? key, rank: 0, processes, stopGraceMs: 2000, ...extra };
}

describe('the restart backoff', () => {
  const cases: [number, number][] = [
    [0, 300],
    [1, 600],
    [2, 1200],
    [3, 2000],
    [40, 2000],
  ];
  for (const [failures, ms] of cases)
    it(`waits ${ms} ms after ${failures} failures`, () => {
      expect(backoffMs(failures, { initialMs: 300, maxMs: 2000 })).toBe(ms);
    });
});

describe('when a failed engine starts again', () => {
  it('is said with the failure, and the next start comes then, not before', async () => {
    const { sup, events } = harness({ settleMs: 10_000 });
    sup.apply([shard('crash/0', [node('process.exit(3)')])]);
    const failures = await until('two failures', () => {
      const failed = events.filter((e) => e.state === 'failed');
      return failed.length >= 2 ? failed : undefined;
    });
    const [first, second] = failures;
    expect(first?.reason).toMatch(/restarting in 300 ms$/);
    expect(second?.reason).toMatch(/restarting in 600 ms$/);
    // Due the backoff after the exit was seen, and started then.
    for (const [failed, ms] of [
      [first, 300],
      [second, 600],
    ] as const) {
      const due = Date.parse(failed?.restart_at ?? '');
      const exited = Date.parse(failed?.last_exit?.at ?? '');
      expect(due - exited).toBeGreaterThanOrEqual(ms);
      expect(due - exited).toBeLessThan(ms + 1000);
    }
    const next = events.find((e) => e.state === 'starting' && e.seen > (first?.seen ?? 0));
    expect(next?.seen).toBeGreaterThanOrEqual(Date.parse(first?.restart_at ?? '') - 5);
    // Only a failed status carries it.
    for (const e of events) if (e.state !== 'failed') expect(e.restart_at).toBeUndefined();
  });

  it('is said when an engine that stopped answering its health check is recycled', async () => {
    const { sup, events } = harness();
    const port = await freePort();
    const server = `const t0 = Date.now(); require('node:http').createServer((q, s) => { const ok = Date.now() - t0 < 300; s.writeHead(ok ? 200 : 500); s.end(ok ? 'ok' : 'broken'); }).listen(${port}, '127.0.0.1');`;
    sup.apply([
      shard('flaky/0', [node(server)], {
        health: { url: `http://127.0.0.1:${port}/health`, loading: 'answers-503' },
      }),
    ]);
    const failed = await until('the recycle', () =>
      events.find((e) => e.state === 'failed' && e.reason?.startsWith('stopped answering') === true),
    );
    // Said at once, before its processes are stopped: no report leaves it failed with no restart coming.
    expect(failed.reason).not.toMatch(/restarting in/);
    expect(Date.parse(failed.restart_at ?? '')).not.toBeNaN();
    const restarting = await until('the restart', () =>
      events.find((e) => e.state === 'failed' && e.reason?.includes('; restarting in') === true),
    );
    expect(Date.parse(restarting.restart_at ?? '')).toBeGreaterThanOrEqual(
      Date.parse(failed.restart_at ?? ''),
    );
  });

  it('is not said for a shard that will not start again by itself', async () => {
    const { sup } = harness();
    sup.apply([shard('empty/0', [])]);
    const s = await until('failed', () =>
      sup.statuses().find((x) => x.key === 'empty/0' && x.state === 'failed'),
    );
    expect(s.reason).toBe('the shard has no process to run: its engine gave no command');
    expect(s.restart_at).toBeUndefined();
  });
});
