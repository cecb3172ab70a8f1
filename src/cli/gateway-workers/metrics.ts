import { AggregatorRegistry, type Registry } from 'prom-client';

/** One metric as Registry.getMetricsAsJSON() gives it: what crosses from a worker. */
export type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

/** Gauges that describe a replica as each worker sees it (the same engine reading): not summed. */
const perReplicaView = 'llmgw_gateway_replica_state';
/** Of the replica load gauge, only the gateway's own in-flight count adds up over workers; the engine's readings do not. */
const replicaLoad = 'llmgw_gateway_replica_load';

/**
 * The metrics of every gateway process (the workers and the primary's own gateway) as one
 * gateway's: counters and histograms summed (prom-client's aggregation), the engines'
 * readings and breaker states taken as the most any process sees.
 */
export async function aggregateMetrics(
  parts: MetricJson[][],
): Promise<{ contentType: string; text: string }> {
  const loads = new Map<string, { labels: MetricJson['values'][number]['labels']; value: number }>();
  let loadMeta: MetricJson | undefined;
  const rest = parts.map((metrics) =>
    metrics.flatMap((m) => {
      if (m.name === perReplicaView) return [{ ...m, aggregator: 'max' as const }];
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
  const registry = AggregatorRegistry.aggregate(rest);
  return { contentType: registry.contentType, text: await registry.metrics() };
}
