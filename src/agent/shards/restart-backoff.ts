/**
 * The agent's wait before starting a failed engine again, one rule for process and container
 * shards: doubling from `initialMs` with each failure since the last stable run, at most `maxMs`.
 */
export function backoffMs(failures: number, backoff: { initialMs: number; maxMs: number }): number {
  return Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(failures, 30));
}
