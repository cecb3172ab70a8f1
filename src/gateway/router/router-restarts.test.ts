import { afterEach, describe, expect, it, vi } from 'vitest';

import { routeReplica } from '../../../test/support/route-replica.js';
import { RestartingModels, restartingModels } from './restarting-models.js';
import { Router, type RouterOptions } from './router.js';
import { RouterError, type Lease, type Restarting, type RouteReplica, type RouterRefusal } from './types.js';

// A model whose only replica's engine its agent restarts leaves the route table for a while,
// with the news that it comes back (the table's `restarting`). Its requests wait in its queue
// for it, within the queue's timeout, rather than being refused. The router's clock is the
// fake timers' (Date.now), so waits and due times move together.

function replica(id: string, over: Partial<RouteReplica> = {}): RouteReplica {
  return routeReplica(id, { model: 'qwen', ...over });
}

const reason = 'replica qwen-1 failed: llama-server killed by SIGKILL; restarting in 1 s';

function news(dueInMs?: number): Map<string, Restarting> {
  return new Map([['qwen', { reason, ...(dueInMs === undefined ? {} : { dueInMs }) }]]);
}

function router(options: RouterOptions = {}): Router {
  vi.useFakeTimers();
  return new Router({
    now: () => Date.now(),
    random: () => 0.5,
    queue: { maxPerModel: 8, timeoutMs: 30_000 },
    ...options,
  });
}

/** A promise's outcome, readable once microtasks have run. */
function track(promise: Promise<Lease>): { lease?: Lease; error?: RouterRefusal } {
  const state: { lease?: Lease; error?: RouterRefusal } = {};
  promise.then(
    (lease) => {
      state.lease = lease;
    },
    (error: unknown) => {
      if (!(error instanceof RouterError)) throw error;
      state.error = error.refusal;
    },
  );
  return state;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('Router: a model whose replica restarts', () => {
  it('keeps its waiters when the last replica leaves the table, and serves them from the restarted one', async () => {
    const r = router();
    r.setReplicas([replica('qwen-1')]);
    const held = await r.acquire('qwen');
    const waiting = [track(r.acquire('qwen')), track(r.acquire('qwen'))];
    // The engine is killed: its agent restarts it in a second.
    r.setReplicas([], news(1000));
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.map((w) => w.error)).toEqual([undefined, undefined]);
    expect(r.queued('qwen')).toBe(2);
    // Requests sent meanwhile wait too.
    const later = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(1000);
    // Loading again: still coming back, no time known.
    r.setReplicas([], news());
    held.release('failed');
    await vi.advanceTimersByTimeAsync(700);
    expect(r.queued('qwen')).toBe(3);
    r.setReplicas([replica('qwen-1', { capacity: 4 })]);
    await vi.advanceTimersByTimeAsync(0);
    expect([...waiting, later].map((w) => w.lease?.replica.id)).toEqual(['qwen-1', 'qwen-1', 'qwen-1']);
    expect(waiting[0]?.lease?.queuedMs).toBe(1700);
    expect(r.queued()).toBe(0);
  });

  it('refuses the waiters of a model that is not coming back, at once, as before', async () => {
    const r = router();
    r.setReplicas([replica('qwen-1')]);
    await r.acquire('qwen');
    const waiting = track(r.acquire('qwen'));
    r.setReplicas([]);
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.error?.kind).toBe('no-replica');
    const fresh = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(0);
    expect(fresh.error?.kind).toBe('no-replica');
  });

  it('refuses its waiters once the news says it will not come back after all', async () => {
    const r = router();
    const waiting = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(0);
    r.setReplicas([], news(1000));
    const held = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(500);
    expect(waiting.error?.kind).toBe('no-replica');
    expect(held.error).toBeUndefined();
    r.setReplicas([]);
    await vi.advanceTimersByTimeAsync(0);
    expect(held.error).toEqual({
      kind: 'no-replica',
      message: 'no ready replica of qwen: llmgw ctl replicas qwen says why',
    });
    expect(r.queued()).toBe(0);
  });

  it('tells a request to come back when the restart is due, if that is past its wait', async () => {
    const r = router();
    r.setReplicas([], news(20_000));
    const early = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(5000);
    // The engine failed again: its next restart is a minute away, past the first request's wait.
    r.setReplicas([], news(60_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(early.error).toEqual({
      kind: 'restarting',
      message: `no replica of qwen is ready, and its restart is due in 60 s, past the 30 s a request waits (gateway.queue.timeout_s): ${reason}; retry then, or see llmgw ctl replicas qwen`,
      retryAfterS: 60,
    });
    const late = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(0);
    expect(late.error).toMatchObject({ kind: 'restarting', retryAfterS: 60 });
    expect(r.queued()).toBe(0);
  });

  it('says, when the wait runs out, to come back in a while: the restart came, its engine still loads', async () => {
    const r = router();
    r.setReplicas([], news(25_000));
    const waiting = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(26_000);
    // Started again, loading.
    r.setReplicas([], news());
    await vi.advanceTimersByTimeAsync(3999);
    expect(waiting.error).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(waiting.error).toEqual({
      kind: 'restarting',
      message: `no replica of qwen became ready in the 30 s the request waited for its restart: ${reason}; retry later, or see llmgw ctl replicas qwen`,
      retryAfterS: 10,
    });
    expect(r.queued()).toBe(0);
  });

  it('refuses a waiter at once when its restart slips past the end of its wait', async () => {
    const r = router();
    r.setReplicas([], news(25_000));
    const waiting = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(29_000);
    r.setReplicas([], news(2500));
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.error).toMatchObject({ kind: 'restarting', retryAfterS: 3 });
    expect(waiting.error?.message).toContain('its restart is due in 3 s, past the 30 s a request waits');
  });

  it('does not hold a retry, which must go to a replica not tried yet', async () => {
    const r = router();
    r.setReplicas([], news(1000));
    const retry = track(r.acquire('qwen', { exclude: new Set(['qwen-1']) }));
    await vi.advanceTimersByTimeAsync(0);
    expect(retry.error?.kind).toBe('no-replica');
  });

  it('bounds the wait by the queue, and lets a client that leaves go', async () => {
    const r = router({ queue: { maxPerModel: 2, timeoutMs: 30_000 } });
    r.setReplicas([], news(1000));
    const gone = new AbortController();
    const leaving = track(r.acquire('qwen', { signal: gone.signal }));
    const staying = track(r.acquire('qwen'));
    const over = track(r.acquire('qwen'));
    await vi.advanceTimersByTimeAsync(0);
    expect(over.error?.kind).toBe('queue-full');
    gone.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(leaving.error?.kind).toBe('cancelled');
    expect(r.queued('qwen')).toBe(1);
    r.setReplicas([replica('qwen-1')]);
    await vi.advanceTimersByTimeAsync(0);
    expect(staying.lease?.replica.id).toBe('qwen-1');
  });

  it('keeps a model with another replica serving as it is: the router has that one', async () => {
    const r = router();
    r.setReplicas([replica('qwen-1'), replica('qwen-2')]);
    const [a, b] = [await r.acquire('qwen'), await r.acquire('qwen')];
    const waiting = track(r.acquire('qwen'));
    r.setReplicas([replica('qwen-2')]);
    a.release('failed');
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.lease).toBeUndefined();
    b.release('ok');
    await vi.advanceTimersByTimeAsync(0);
    expect(waiting.lease?.replica.id).toBe('qwen-2');
  });
});

describe("the route table's restart news, as the router takes it", () => {
  const now = Date.parse('2025-01-01T00:00:00.000Z');
  const cases: [string, { at?: string; reason: string } | undefined, Restarting | undefined][] = [
    ['due in 1.5 s', { at: '2025-01-01T00:00:01.500Z', reason }, { reason, dueInMs: 1500 }],
    [
      'due already (a clock behind, or a start under way)',
      { at: '2024-12-31T23:59:58.000Z', reason },
      { reason, dueInMs: 0 },
    ],
    ['loading again: no time', { reason }, { reason }],
    ['a time that is not one', { at: 'soon', reason }, { reason }],
    ['not restarting', undefined, undefined],
  ];
  for (const [what, restarting, taken] of cases)
    it(what, () => {
      const entry = { name: 'qwen', ...(restarting === undefined ? {} : { restarting }) };
      expect(restartingModels([entry], now).get('qwen')).toEqual(taken);
    });
});

describe('what a request that waited out a restart is told to do', () => {
  const cases: [string, number | undefined, number, number][] = [
    ['the restart still ahead (a timer that fired early): when it is due', 5000, 1000, 4],
    ['the restart past, the engine loading: a while', 5000, 6000, 10],
    ['loading, no time known: a while', undefined, 1000, 10],
  ];
  for (const [what, dueInMs, at, retryAfterS] of cases)
    it(what, () => {
      const models = new RestartingModels(30_000);
      models.set(news(dueInMs), 0);
      expect(models.timedOut('qwen', at)?.refusal).toMatchObject({ kind: 'restarting', retryAfterS });
      expect(models.timedOut('llama', at)).toBeUndefined();
    });
});
