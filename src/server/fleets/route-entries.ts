import type { ModelSpec, ProfileSpec } from '../../catalog/model-spec.js';
import { engineFor } from '../../engines/registry.js';
import type { ReplicaView } from '../../protocol/replica-views.js';
import type { CatalogEntry, RouteReplica } from '../../protocol/routes.js';

import { restartingOf, unavailableReason, type ModelReplicas, type ReplicaOfModel } from './availability.js';

/**
 * The route table's entries, one way whoever runs the replicas (agents, or Kubernetes pods):
 * a replica the gateway may route to, and a model of the catalog with why none is ready.
 */

export function routeReplica(o: {
  id: string;
  model: string;
  profile: ProfileSpec;
  endpoint: string;
  apiKey: string;
  llamaParallel: number;
}): RouteReplica {
  const { profile, endpoint } = o;
  const engine = engineFor(profile.engine);
  return {
    id: o.id,
    model: o.model,
    engine: profile.engine,
    endpoint,
    apiKey: o.apiKey,
    servedName: profile.served_model_name ?? o.model,
    adapters: profile.adapters.map((a) => a.name),
    // Requests it computes at once: its args, else the engine's default (llama.cpp: the node's --parallel).
    capacity: engine.capacity(profile.args, o.llamaParallel),
    loadMetrics: engine.loadMetrics,
    metricsUrl: `${endpoint}${engine.metricsPath}`,
    healthPath: engine.healthPath,
  };
}

/** A replica as the API shows it, as much as its model's availability needs: one rule for agents and Kubernetes. */
export function replicaOfModel(
  v: Pick<ReplicaView, 'id' | 'state' | 'reason' | 'restarts' | 'restart_at'>,
): ReplicaOfModel {
  return { id: v.id ?? '', state: v.state, reason: v.reason, restarts: v.restarts, restart_at: v.restart_at };
}

export function catalogEntry(
  m: ModelSpec,
  state: Pick<ModelReplicas, 'wanted' | 'replicas' | 'pending'>,
): CatalogEntry {
  // Autoscaled to zero, it starts on a request (the gateway's waiting room): not unavailable.
  const wakeable = m.autoscale?.min === 0;
  const unavailable =
    wakeable && state.wanted === 0 ? undefined : unavailableReason({ model: m.name, ...state });
  const restarting = unavailable === undefined ? restartingOf(state) : undefined;
  return {
    name: m.name,
    adapters: [...new Set(m.profiles.flatMap((p) => p.adapters.map((a) => a.name)))],
    engines: [...new Set(m.profiles.map((p) => p.engine))],
    ...(m.context_length === undefined ? {} : { context_length: m.context_length }),
    ...(unavailable === undefined ? {} : { unavailable }),
    ...(restarting === undefined ? {} : { restarting }),
    ...(wakeable ? { wakeable: true } : {}),
  };
}
