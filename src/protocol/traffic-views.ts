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
