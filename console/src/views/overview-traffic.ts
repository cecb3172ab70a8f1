import type { TrafficPoint, TrafficView } from '../../../src/protocol/traffic-views.js';

/** A figure now (the last step) and over the hour the series holds. */
export interface Figure {
  now: number | null;
  hour: number | null;
}

export interface TrafficSummary {
  requestsPerS: Figure;
  tokensPerS: Figure;
  ttftP50Ms: Figure;
  ttftP95Ms: Figure;
  errorsPerS: Figure;
  /** Minutes the series covers. */
  minutes: number;
}

const tokens = (p: TrafficPoint) => p.prompt_tokens_per_s + p.completion_tokens_per_s;

/** The mean of the steps' rates (steps are of equal length, so this is the hour's rate). */
function mean(points: readonly TrafficPoint[], of: (p: TrafficPoint) => number): number | null {
  if (points.length === 0) return null;
  return points.reduce((s, p) => s + of(p), 0) / points.length;
}

/**
 * A latency over the hour: each step's figure weighted by its requests (a step without a
 * streamed answer has none and counts for nothing), so a quiet minute does not pull it down.
 */
function weighted(points: readonly TrafficPoint[], of: (p: TrafficPoint) => number | null): number | null {
  let sum = 0;
  let weight = 0;
  for (const p of points) {
    const v = of(p);
    if (v === null || p.requests_per_s <= 0) continue;
    sum += v * p.requests_per_s;
    weight += p.requests_per_s;
  }
  return weight === 0 ? null : sum / weight;
}

export function trafficSummary(v: TrafficView): TrafficSummary {
  const points = v.points;
  const last = points.at(-1);
  return {
    requestsPerS: { now: last?.requests_per_s ?? null, hour: mean(points, (p) => p.requests_per_s) },
    tokensPerS: { now: last === undefined ? null : tokens(last), hour: mean(points, tokens) },
    ttftP50Ms: { now: last?.ttft_p50_ms ?? null, hour: weighted(points, (p) => p.ttft_p50_ms) },
    ttftP95Ms: { now: last?.ttft_p95_ms ?? null, hour: weighted(points, (p) => p.ttft_p95_ms) },
    errorsPerS: { now: last?.errors_per_s ?? null, hour: mean(points, (p) => p.errors_per_s) },
    minutes: Math.round((points.length * v.step_s) / 60),
  };
}

/** A rate as people read it: `0`, `0.05`, `3.2`, `118`. */
export function rate(n: number | null): string {
  if (n === null) return '–';
  if (n === 0) return '0';
  if (n < 0.1) return n.toFixed(2);
  if (n < 10) return n.toFixed(1);
  return Math.round(n).toString();
}

export function millis(n: number | null): string {
  return n === null ? '–' : `${Math.round(n)} ms`;
}

/** The chart's rows: the time of day and each rate. */
export function chartRows(
  v: TrafficView,
): { time: string; requests: number; tokens: number; errors: number }[] {
  return v.points.map((p) => ({
    time: new Date(p.t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }),
    requests: p.requests_per_s,
    tokens: tokens(p),
    errors: p.errors_per_s,
  }));
}
