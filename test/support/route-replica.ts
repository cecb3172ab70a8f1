import type { RouteReplica } from '../../src/protocol/routes.js';

/**
 * A replica as the route table carries it, for tests of the gateway's parts: a llama.cpp
 * engine at `http://ID:8080` (or `over.endpoint`), with its metrics and health beside it.
 */
export function routeReplica(id: string, over: Partial<RouteReplica> = {}): RouteReplica {
  const endpoint = over.endpoint ?? `http://${id}:8080`;
  return {
    id,
    model: 'm',
    engine: 'llamacpp',
    endpoint,
    apiKey: 'k',
    servedName: over.model ?? 'm',
    adapters: [],
    capacity: 1,
    loadMetrics: { running: 'llamacpp:requests_processing', waiting: 'llamacpp:requests_deferred' },
    metricsUrl: `${endpoint}/metrics`,
    healthPath: '/health',
    ...over,
  };
}
