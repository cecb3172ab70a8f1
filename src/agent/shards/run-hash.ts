import { createHash } from 'node:crypto';

import type { ShardRun } from './types.js';

/**
 * What makes a shard's processes what they are: a change in any of these restarts it.
 * The stop grace is left out, as it only matters once the shard stops.
 */
export function runHash(run: ShardRun): string {
  const { processes, health, gpu, degradedReason } = run;
  return createHash('sha256').update(stableJson({ processes, health, gpu, degradedReason })).digest('hex');
}

/** JSON with object keys sorted, so the same value always gives the same text. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined ? 'null' : stableJson(v))).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  // undefined for what JSON cannot hold (functions); the types say string.
  const text = JSON.stringify(value) as string | undefined;
  return text ?? 'null';
}
