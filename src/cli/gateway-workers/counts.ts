import type { GatewayCounts, ModelCounts } from '../../protocol/traffic-views.js';

/** Several gateways' counters (the workers' and the primary's) as one's, for the traffic series. */
export function sumCounts(parts: readonly GatewayCounts[]): Map<string, ModelCounts> {
  const out = new Map<string, ModelCounts>();
  for (const part of parts) {
    for (const [model, c] of part) {
      const prev = out.get(model);
      if (prev === undefined) {
        out.set(model, { ...c, ttft: { bounds: c.ttft.bounds, counts: [...c.ttft.counts] } });
        continue;
      }
      out.set(model, {
        requests: prev.requests + c.requests,
        errors: prev.errors + c.errors,
        prompt_tokens: prev.prompt_tokens + c.prompt_tokens,
        completion_tokens: prev.completion_tokens + c.completion_tokens,
        // Every gateway buckets alike (one build): counts add bucket by bucket.
        ttft: {
          bounds: prev.ttft.bounds,
          counts: prev.ttft.counts.map((n, i) => n + (c.ttft.counts[i] ?? 0)),
        },
      });
    }
  }
  return out;
}
