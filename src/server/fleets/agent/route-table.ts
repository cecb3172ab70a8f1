import type { ModelSpec } from '../../../catalog/model-spec.js';
import type { RouteReplica, RouteTable } from '../../../protocol/routes.js';
import type { Catalog } from '../../state/catalog.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import type { SettingsHolder } from '../../state/settings-holder.js';
import type { ReplicaOfModel } from '../availability.js';
import { catalogEntry, replicaOfModel, routeReplica } from '../route-entries.js';

import type { Placed } from './placed.js';
import type { ReplicaKeys } from './replica-keys.js';
import type { ReplicaViews } from './replica-views.js';

export interface RouteTableSources {
  catalog: Catalog;
  registry: NodeRegistry;
  settings: SettingsHolder;
  placed: Placed;
  views: ReplicaViews;
  keys: ReplicaKeys;
  scaledReplicas?: ((spec: ModelSpec) => number | undefined) | undefined;
  /** The cluster CA the nodes' engine forwarders' certificates chain to (TLS on). */
  engineCa?: (() => string | undefined) | undefined;
}

/** What the gateway routes to: replicas that answer (ready, or degraded but serving), and every model of the catalog. */
export async function agentRouteTable(o: RouteTableSources): Promise<RouteTable> {
  const views = o.registry.views();
  const settings = o.settings.current.settings;
  const replicas: RouteReplica[] = [];
  const states = new Map<string, ReplicaOfModel[]>();
  for (const r of o.placed.replicas) {
    const v = o.views.view(r, views);
    const ofModel = states.get(r.model) ?? [];
    ofModel.push(replicaOfModel(v));
    states.set(r.model, ofModel);
    const profile = r.spec.profiles.find((p) => p.name === r.profile);
    const apiKey = o.keys.keyOf(r);
    if (v.endpoint === undefined || profile === undefined || apiKey === undefined) continue;
    replicas.push(
      routeReplica({
        id: r.id,
        model: r.model,
        profile,
        endpoint: v.endpoint,
        apiKey,
        llamaParallel: settings.agent.engines.llamacpp.parallel,
      }),
    );
  }
  const pending = new Map(o.placed.pending.map((p) => [p.model, p]));
  const models = (await o.catalog.specs()).map((m) =>
    catalogEntry(m, {
      wanted: o.scaledReplicas?.(m) ?? m.replicas,
      replicas: states.get(m.name) ?? [],
      pending: pending.get(m.name),
    }),
  );
  const ca = o.engineCa?.();
  return { replicas, models, ...(ca === undefined ? {} : { ca }) };
}
