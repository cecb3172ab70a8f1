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
