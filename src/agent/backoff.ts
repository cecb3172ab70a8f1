/**
 * Exponential backoff with full jitter: the n-th retry waits a random time up to
 * initial × 2^n, capped. The randomness spreads a fleet's reconnections out after a
 * control plane restart, instead of every agent knocking at the same instant.
 */
export function backoffDelay(
  attempt: number,
  options: { initialMs: number; maxMs: number },
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(random() * ceiling);
}
