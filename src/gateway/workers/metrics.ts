import { AggregatorRegistry, type Registry } from 'prom-client';

import type { ReplicaBreaker } from './breaker-board.js';

/** One metric as Registry.getMetricsAsJSON() gives it: what crosses from a worker. */
export type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

/** Each replica's breaker state (the board's, one for all processes) and whether its metrics are stale (the most any process sees). */
const replicaState = 'llmgw_gateway_replica_state';
const breakerStates = new Set(['closed', 'open', 'half-open']);
/** Of the replica load gauge, only the gateway's own in-flight count adds up over workers; the engine's readings do not. */
const replicaLoad = 'llmgw_gateway_replica_load';

/**
 * The metrics of every gateway process (the workers and the primary's own gateway) as one
 * gateway's: counters and histograms summed (prom-client's aggregation), the engines'
 * readings taken as the most any process sees, and each replica's breaker state the one the
 * primary's board holds for all of them (`breakers`).
 */
export async function aggregateMetrics(
  parts: MetricJson[][],
  breakers: readonly ReplicaBreaker[],
): Promise<{ contentType: string; text: string }> {
  const loads = new Map<string, { labels: MetricJson['values'][number]['labels']; value: number }>();
  let loadMeta: MetricJson | undefined;
  let stateMeta: MetricJson | undefined;
  const rest = parts.map((metrics) =>
    metrics.flatMap((m) => {
      if (m.name === replicaState) {
        stateMeta ??= m;
        const stale = m.values.filter((v) => !breakerStates.has(String(v.labels['state'])));
        return [{ ...m, values: stale, aggregator: 'max' as const }];
      }
      if (m.name !== replicaLoad) return [m];
      loadMeta ??= m;
      for (const v of m.values) {
        const key = JSON.stringify(v.labels);
        const prev = loads.get(key);
        const sum = v.labels['kind'] === 'in_flight';
        loads.set(key, {
          labels: v.labels,
          value: prev === undefined ? v.value : sum ? prev.value + v.value : Math.max(prev.value, v.value),
        });
      }
      return [];
    }),
  );
  if (loadMeta !== undefined) rest.push([{ ...loadMeta, values: [...loads.values()] }]);
  if (stateMeta !== undefined)
    rest.push([
      {
        ...stateMeta,
        aggregator: 'max',
        values: breakers.map((b) => ({
          labels: { replica: b.replica, model: b.model, state: b.state },
          value: 1,
        })),
      },
    ]);
  const registry = AggregatorRegistry.aggregate(rest);
  return { contentType: registry.contentType, text: await registry.metrics() };
}
