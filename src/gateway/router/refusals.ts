import { RouterError } from './types.js';

/** What a client is told when a request cannot be routed; each says what to do next. */

export function noReplica(model: string): RouterError {
  return new RouterError({
    kind: 'no-replica',
    message: `no ready replica of ${model}: llmgw ctl replicas ${model} says why`,
  });
}

export function allExcluded(model: string): RouterError {
  return new RouterError({
    kind: 'no-replica',
    message: `every ready replica of ${model} failed this request: llmgw ctl replicas ${model} says why`,
  });
}

export function queueFull(model: string, waiting: number, retryAfterS: number): RouterError {
  return new RouterError({
    kind: 'queue-full',
    message: `every replica of ${model} is busy and ${waiting} requests are already waiting: retry later, or add replicas (llmgw ctl model scale ${model} N)`,
    retryAfterS,
  });
}

export function queueTimeout(model: string, waitedMs: number, retryAfterS: number): RouterError {
  return new RouterError({
    kind: 'queue-timeout',
    message: `every replica of ${model} is busy and the request waited ${seconds(waitedMs)} s: retry later, or add replicas (llmgw ctl model scale ${model} N)`,
    retryAfterS,
  });
}

/** The wait ended with every replica's breaker open: adding replicas would not be the fix. */
export function failingTimeout(model: string, waitedMs: number, retryAfterS: number): RouterError {
  return new RouterError({
    kind: 'queue-timeout',
    message: `every replica of ${model} is failing and the request waited ${seconds(waitedMs)} s: llmgw ctl replicas ${model} says why`,
    retryAfterS,
  });
}

/** Its restart is due after the request's wait would end: come back then rather than wait for nothing. */
export function restartTooLate(
  model: string,
  o: { reason: string; waitMs: number; dueInS: number },
): RouterError {
  return new RouterError({
    kind: 'restarting',
    message: `no replica of ${model} is ready, and its restart is due in ${o.dueInS} s, past the ${seconds(o.waitMs)} s a request waits (gateway.queue.timeout_s): ${o.reason}; retry then, or see llmgw ctl replicas ${model}`,
    retryAfterS: o.dueInS,
  });
}

/** The request waited its whole wait for a replica that is restarting. */
export function restartTimeout(
  model: string,
  o: { reason: string; waitedMs: number; retryAfterS: number },
): RouterError {
  return new RouterError({
    kind: 'restarting',
    message: `no replica of ${model} became ready in the ${seconds(o.waitedMs)} s the request waited for its restart: ${o.reason}; retry later, or see llmgw ctl replicas ${model}`,
    retryAfterS: o.retryAfterS,
  });
}

export function cancelled(model: string): RouterError {
  return new RouterError({
    kind: 'cancelled',
    message: `the client gave up while waiting for a replica of ${model}`,
  });
}

function seconds(ms: number): string {
  const s = ms / 1000;
  return s >= 10 ? String(Math.round(s)) : String(Math.round(s * 10) / 10);
}
