import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import { tooManyConnections } from '../http1/answers.js';
import type { ClientResponse } from '../http1/client-io.js';
import type { CatalogEntry } from '../protocol/routes.js';

import { remoteKeys } from './keys.js';
import { GatewayError, sendError, toGatewayError, type FailureContext } from './openai-errors.js';
import {
  cancelled,
  failingTimeout,
  noReplica,
  queueFull,
  queueTimeout,
  restartTimeout,
  restartTooLate,
} from './router/refusals.js';
import { WaitingRoom, type WaitingRoomOptions } from './waiting-room.js';

// Every 503 the gateway sends either says when to retry (Retry-After, no `x-should-retry`)
// or is final (`x-should-retry: false`, no Retry-After) and says why. The table holds each
// one, built the way the gateway builds it, with what a client is told.

const ctx: FailureContext = { model: 'm', maxBodyBytes: 1024 };

/** What a client reads of an answer: its status, Retry-After, x-should-retry and message. */
function answered(e: GatewayError): {
  status: number;
  retryAfter: unknown;
  shouldRetry: unknown;
  message: string;
} {
  const r = {
    headersSent: false,
    writableFinished: false,
    status: 0,
    headers: {} as Record<string, unknown>,
    body: '',
    writeHead(status: number, headers: Record<string, unknown>) {
      r.status = status;
      r.headers = headers;
      r.headersSent = true;
      return r;
    },
    end(chunk?: string) {
      r.body += chunk ?? '';
      r.writableFinished = true;
      return r;
    },
    destroy: () => r,
  };
  sendError(r as unknown as ClientResponse, e, 'req-1');
  const body = JSON.parse(r.body) as { error: { message: string } };
  return {
    status: r.status,
    retryAfter: r.headers['retry-after'],
    shouldRetry: r.headers['x-should-retry'],
    message: body.error.message,
  };
}

async function refusalOf(p: Promise<unknown> | (() => unknown)): Promise<GatewayError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error('it was not refused');
}

/** A waiting room for `m` (scaled to zero) over a view that never gets ready. */
function room(o: Partial<WaitingRoomOptions> = {}, entry: Partial<CatalogEntry> = {}): WaitingRoom {
  const m: CatalogEntry = { name: 'm', adapters: [], engines: ['vllm'], wakeable: true, ...entry };
  return new WaitingRoom({
    maxPerModel: 1,
    timeoutMs: 20,
    refresh: () => undefined,
    refreshMs: 60_000,
    view: { ready: () => false, room: () => 0, entry: () => m },
    logger: pino({ level: 'silent' }),
    ...o,
  });
}

/** Each 503, by where it comes from: the router's queue, the waiting room, the keys of a gateway of its own. */
async function everyServiceUnavailable(): Promise<[string, GatewayError][]> {
  const routed = (e: Error, more: Partial<FailureContext> = {}) => toGatewayError(e, { ...ctx, ...more });
  const full = room();
  void full.enter('m').catch(() => undefined);
  const roomFull = await refusalOf(() => full.enter('m'));
  full.stop();
  const waited = await refusalOf(room().enter('m'));
  const waitedDown = await refusalOf(room({}, { unavailable: 'replica m-1 failed: oom' }).enter('m'));
  const refusedWake = await refusalOf(
    room({ timeoutMs: 60_000, wake: () => Promise.resolve({ ok: false, reason: 'no node has room' }) }).enter(
      'm',
    ),
  );
  const stopping = room({ timeoutMs: 60_000 });
  const stopped = refusalOf(stopping.enter('m'));
  stopping.stop();
  const keys = remoteKeys({
    request: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:8080')),
  });
  return [
    ['router: no replica ready yet', routed(noReplica('m'))],
    ['router: no replica can come up', routed(noReplica('m'), { unavailable: 'replica m-1 failed: oom' })],
    ['router: the queue full', routed(queueFull('m', 256, 5))],
    ['router: the queue waited out, busy', routed(queueTimeout('m', 30_000, 5))],
    ['router: the queue waited out, failing', routed(failingTimeout('m', 30_000, 3))],
    [
      'router: the restart due after the wait',
      routed(restartTooLate('m', { reason: 'replica m-1 failed: oom', waitMs: 30_000, dueInS: 60 })),
    ],
    [
      'router: the restart waited out',
      routed(restartTimeout('m', { reason: 'replica m-1 failed: oom', waitedMs: 30_000, retryAfterS: 10 })),
    ],
    ['router: the client gone', routed(cancelled('m'))],
    ['waiting room: full', roomFull],
    ['waiting room: waited out', waited],
    ['waiting room: waited out, its replica failed', waitedDown],
    ['waiting room: the control plane will not start it', refusedWake],
    ['waiting room: the gateway stops', await stopped],
    ['keys: the control plane away, the key unseen', await refusalOf(keys.check('llmgw_key_x'))],
  ];
}

describe('every 503 the gateway sends', () => {
  it('says when to retry, or is final and says why', async () => {
    const rows = (await everyServiceUnavailable()).map(([what, e]) => {
      const a = answered(e);
      expect(a.status, what).toBe(503);
      // One or the other, never both, never neither.
      expect(a.retryAfter === undefined, what).toBe(a.shouldRetry === 'false');
      if (a.shouldRetry === 'false') expect(a.message, what).toMatch(/can serve: \S/);
      else expect(a.retryAfter, what).toBeGreaterThanOrEqual(1);
      return [what, a.shouldRetry === 'false' ? 'final' : a.retryAfter];
    });
    expect(rows).toEqual([
      ['router: no replica ready yet', 10],
      ['router: no replica can come up', 'final'],
      ['router: the queue full', 5],
      ['router: the queue waited out, busy', 5],
      ['router: the queue waited out, failing', 3],
      ['router: the restart due after the wait', 60],
      ['router: the restart waited out', 10],
      ['router: the client gone', 1],
      ['waiting room: full', 5],
      ['waiting room: waited out', 10],
      ['waiting room: waited out, its replica failed', 10],
      ['waiting room: the control plane will not start it', 30],
      ['waiting room: the gateway stops', 1],
      ['keys: the control plane away, the key unseen', 5],
    ]);
  });

  it('says how long the restart takes, and why the replica is down, when it waited for one', () => {
    const e = toGatewayError(
      restartTimeout('m', {
        reason: 'replica m-1 failed: oom; restarting in 4 s',
        waitedMs: 30_000,
        retryAfterS: 4,
      }),
      ctx,
    );
    expect(answered(e)).toEqual({
      status: 503,
      retryAfter: 4,
      shouldRetry: undefined,
      message:
        'no replica of m became ready in the 30 s the request waited for its restart: replica m-1 failed: oom; restarting in 4 s; retry later, or see llmgw ctl replicas m',
    });
    expect(
      answered(
        toGatewayError(
          restartTooLate('m', { reason: 'replica m-1 failed: oom', waitMs: 30_000, dueInS: 45 }),
          ctx,
        ),
      ).message,
    ).toBe(
      'no replica of m is ready, and its restart is due in 45 s, past the 30 s a request waits (gateway.queue.timeout_s): replica m-1 failed: oom; retry then, or see llmgw ctl replicas m',
    );
  });

  it('holds for the connection limit of the HTTP layer too', () => {
    const r = tooManyConnections('10.0.0.1', 512);
    expect(r.status).toBe(503);
    expect(r.retryAfterS).toBe(1);
  });
});
