import { zeroCounts, type ModelCounts, type TrafficPoint } from '../../protocol/traffic-views.js';

// Added up where the gateway's processes sum their counters too (protocol, below both).
export { addCounts as sumCounts } from '../../protocol/traffic-views.js';

const zero = zeroCounts;

/** The growth of a counter; one that went down was reset (a gateway restarted), so all of it is new. */
function delta(before: number, after: number): number {
  return after >= before ? after - before : after;
}

/**
 * The rates between two readings of one model's (or all models') counters, `seconds` apart.
 * A model first seen in `after` counts from zero.
 */
export function pointBetween(
  before: ModelCounts | undefined,
  after: ModelCounts,
  o: { seconds: number; t: string },
): TrafficPoint {
  const b = before ?? zero;
  const per = (x: number, y: number) => round(delta(x, y) / o.seconds, 3);
  const requests = delta(b.requests, after.requests);
  // A reset of the counters shows as fewer requests than before: the histogram was reset too.
  const reset = after.requests < b.requests;
  const counts = after.ttft.counts.map((n, i) => (reset ? n : delta(b.ttft.counts[i] ?? 0, n)));
  return {
    t: o.t,
    requests_per_s: round(requests / o.seconds, 3),
    prompt_tokens_per_s: per(b.prompt_tokens, after.prompt_tokens),
    completion_tokens_per_s: per(b.completion_tokens, after.completion_tokens),
    ttft_p50_ms: msOf(quantile(0.5, after.ttft.bounds, counts)),
    ttft_p95_ms: msOf(quantile(0.95, after.ttft.bounds, counts)),
    errors_per_s: per(b.errors, after.errors),
  };
}

/**
 * The q-quantile of a histogram's observations, interpolated inside the bucket it falls in,
 * as Prometheus' histogram_quantile does; in the bucket above every bound, the highest bound.
 * `counts` per bucket, not cumulative, with one more for those above the last bound.
 */
export function quantile(
  q: number,
  bounds: readonly number[],
  counts: readonly number[],
): number | undefined {
  const total = counts.reduce((a, n) => a + n, 0);
  if (total === 0) return undefined;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < bounds.length; i++) {
    const n = counts[i] ?? 0;
    if (n > 0 && below + n >= rank) {
      const lower = i === 0 ? 0 : (bounds[i - 1] as number);
      const upper = bounds[i] as number;
      return lower + ((upper - lower) * (rank - below)) / n;
    }
    below += n;
  }
  return bounds.at(-1);
}

function msOf(seconds: number | undefined): number | null {
  return seconds === undefined ? null : round(seconds * 1000, 1);
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
