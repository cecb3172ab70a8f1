import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import type { WakeAnswer } from '../protocol/load-report.js';
import type { CatalogEntry } from '../protocol/routes.js';

import { GatewayError } from './openai-errors.js';
import { RouterError } from './router/types.js';
import { WaitingRoom, type WaitingRoomOptions } from './waiting-room.js';

/** A room over a view the test sets: whether `m` is ready, how many it takes now, whether it is in the catalog. */
function room(o: Partial<WaitingRoomOptions> = {}) {
  const state = { ready: false, room: 100, inCatalog: true, refreshes: 0 };
  const entry: CatalogEntry = { name: 'm', adapters: [], engines: ['vllm'], wakeable: true };
  const r = new WaitingRoom({
    maxPerModel: 10,
    timeoutMs: 5000,
    refresh: () => {
      state.refreshes++;
    },
    refreshMs: 10,
    view: {
      ready: () => state.ready,
      room: () => state.room,
      entry: () => (state.inCatalog ? entry : undefined),
    },
    logger: pino({ level: 'silent' }),
    ...o,
  });
  return { r, state, entry };
}

const settled = async (p: Promise<unknown>) => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setTimeout(resolve, 0));
  return done;
};
async function refusalOf(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error('it was not refused');
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the waiting room', () => {
  it('hands waiters over oldest first, no more at once than the model takes', async () => {
    // No tick of its own in this test: the hand-overs are the test's changed() calls.
    const { r, state } = room({ refreshMs: 60_000 });
    const a = r.enter('m');
    const b = r.enter('m');
    const c = r.enter('m');
    expect(r.waiting('m')).toBe(3);
    r.changed();
    expect(await settled(a)).toBe(false);
    state.ready = true;
    state.room = 2;
    r.changed();
    expect(await settled(a)).toBe(true);
    expect(await settled(b)).toBe(true);
    expect(await settled(c)).toBe(false);
    expect(r.waiting('m')).toBe(1);
    state.room = 0;
    r.changed();
    expect(await settled(c)).toBe(false);
    state.room = 1;
    r.changed();
    expect(await c).toBeGreaterThanOrEqual(0);
    expect(r.waiting()).toBe(0);
    expect(r.counts()).toEqual(new Map([['m', 0]]));
  });

  it('reads the routes sooner while anyone waits, and stops when nobody does', async () => {
    const { r, state } = room();
    const a = r.enter('m');
    await sleep(60);
    expect(state.refreshes).toBeGreaterThanOrEqual(2);
    state.ready = true;
    await a;
    await sleep(30);
    const after = state.refreshes;
    await sleep(50);
    expect(state.refreshes).toBe(after);
  });

  it('refuses past its count at once, and a waiter whose client left', async () => {
    const { r } = room({ maxPerModel: 1 });
    const abort = new AbortController();
    const a = r.enter('m', abort.signal);
    expect(() => r.enter('m')).toThrow(
      'm is scaled to zero and starting, and 1 requests already wait for it (gateway.waiting_room.max_per_model): retry in a few seconds',
    );
    abort.abort();
    const e: unknown = await a.catch((x: unknown) => x);
    expect(e instanceof RouterError && e.refusal.kind).toBe('cancelled');
    expect(r.waiting('m')).toBe(0);
  });

  it('wakes the model once at the first waiter, never twice at once, and again every wakeEveryMs', async () => {
    const calls: string[] = [];
    let answer: (a: WakeAnswer) => void = () => undefined;
    const { r, state } = room({
      wakeEveryMs: 20,
      wake: (model) => {
        calls.push(model);
        return new Promise((resolve) => (answer = resolve));
      },
    });
    const a = r.enter('m');
    const b = r.enter('m');
    expect(calls).toEqual(['m']);
    await sleep(80);
    expect(calls).toEqual(['m']);
    answer({ ok: true });
    for (let i = 0; i < 200 && calls.length < 2; i++) await sleep(10);
    expect(calls).toEqual(['m', 'm']);
    answer({ ok: true });
    state.ready = true;
    await Promise.all([a, b]);
  });

  it('refuses every waiter at once with the control plane’s reason', async () => {
    const { r } = room({ wake: () => Promise.resolve({ ok: false, reason: 'autoscale max is 0' }) });
    const errors = await Promise.all([refusalOf(r.enter('m')), refusalOf(r.enter('m'))]);
    for (const e of errors) {
      expect(e.status).toBe(503);
      expect(e.message).toMatch(
        /^m is scaled to zero and cannot be started: autoscale max is 0 \(the request waited [\d.]+ s\)$/,
      );
    }
  });

  it('says why when the wait runs out: the catalog’s reason, the control plane unreachable, or still starting', async () => {
    const cases: [Partial<WaitingRoomOptions>, string | undefined, RegExp][] = [
      [{}, 'its replica failed: out of memory', /: its replica failed: out of memory$/],
      [
        { wake: () => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.1:8080')) },
        undefined,
        /: the control plane could not be asked to start it \(connect ECONNREFUSED 10\.0\.0\.1:8080\)$/,
      ],
      [{}, undefined, /: it is still starting \(llmgw ctl replicas m says how far it got\)$/],
    ];
    for (const [options, unavailable, reason] of cases) {
      const { r, entry } = room({ timeoutMs: 50, ...options });
      if (unavailable !== undefined) entry.unavailable = unavailable;
      const e = await refusalOf(r.enter('m'));
      expect(e.retryAfterS).toBe(10);
      expect(e.message).toMatch(
        /^no replica of m became ready in the [\d.]+ s the request waited \(gateway\.waiting_room\.timeout_s\)/,
      );
      expect(e.message).toMatch(reason);
    }
  });

  it('refuses waiters of a model that left the catalog, and all of them when the gateway stops', async () => {
    const { r, state } = room();
    const a = r.enter('m');
    state.inCatalog = false;
    r.changed();
    const e = await refusalOf(a);
    expect(e.code).toBe('model_not_found');
    expect(e.message).toMatch(
      /^model "m" left the catalog while the request waited [\d.]+ s for it to start$/,
    );
    state.inCatalog = true;
    const b = r.enter('m');
    r.stop();
    expect((await refusalOf(b)).message).toMatch(
      /^the gateway stopped while the request waited [\d.]+ s for a replica of m to start: send it again$/,
    );
  });
});
