/**
 * The gateway's counters as they stand, per model label (a catalog model, `unknown`, or `-`
 * for requests that never named one): what the control plane samples for GET /api/v1/traffic.
 */
export interface ModelCounts {
  /** Requests answered (or refused), every status. */
  requests: number;
  /** Those answered with a status of 400 or more (refusals, limits, engine failures). */
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
  /**
   * Time to first token of streamed answers: each bucket's upper bound in seconds, and how many
   * fell in each (not cumulative); `counts` has one more entry, for those above every bound.
   */
  ttft: { bounds: readonly number[]; counts: readonly number[] };
}

export type GatewayCounts = ReadonlyMap<string, ModelCounts>;

/** No requests counted yet. */
export const zeroCounts: ModelCounts = {
  requests: 0,
  errors: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  ttft: { bounds: [], counts: [] },
};

/** Counters of several models added up (their histograms have the same buckets: one table). */
export function addCounts(all: Iterable<ModelCounts>): ModelCounts {
  let out: ModelCounts = zeroCounts;
  for (const c of all) {
    out = {
      requests: out.requests + c.requests,
      errors: out.errors + c.errors,
      prompt_tokens: out.prompt_tokens + c.prompt_tokens,
      completion_tokens: out.completion_tokens + c.completion_tokens,
      ttft: {
        bounds: c.ttft.bounds,
        counts: c.ttft.counts.map((n, i) => n + (out.ttft.counts[i] ?? 0)),
      },
    };
  }
  return out;
}

/** One step of the series: rates over the step that ends at `t`. */
export interface TrafficPoint {
  /** The end of the step, ISO 8601. */
  t: string;
  requests_per_s: number;
  prompt_tokens_per_s: number;
  completion_tokens_per_s: number;
  /** null when no streamed answer got its first token in the step. */
  ttft_p50_ms: number | null;
  ttft_p95_ms: number | null;
  errors_per_s: number;
}

/** GET /api/v1/traffic. */
export interface TrafficView {
  /** Seconds per point. */
  step_s: number;
  /** Whether a gateway runs in this process (false with `llmgw gateway` apart: the series stay empty). */
  gateway: boolean;
  /** Oldest first, up to an hour of them. */
  points: TrafficPoint[];
  /** The same, per model the gateway counted (requests that named no model are in `points` only). */
  models: Record<string, TrafficPoint[]>;
}
