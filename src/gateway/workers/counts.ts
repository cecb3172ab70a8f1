import { addCounts, type GatewayCounts, type ModelCounts } from '../../protocol/traffic-views.js';

/** Several gateways' counters (the workers' and the primary's) as one's, for the traffic series. */
export function sumCounts(parts: readonly GatewayCounts[]): Map<string, ModelCounts> {
  const byModel = new Map<string, ModelCounts[]>();
  for (const part of parts)
    for (const [model, c] of part) {
      const list = byModel.get(model);
      if (list === undefined) byModel.set(model, [c]);
      else list.push(c);
    }
  // Every gateway buckets alike (one build): counts add bucket by bucket.
  return new Map([...byModel].map(([model, list]) => [model, addCounts(list)]));
}
