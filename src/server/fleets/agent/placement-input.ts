import type { ModelSpec } from '../../../catalog/model-spec.js';
import { blobKey } from '../../../models/cache-layout.js';
import { parseSource } from '../../../models/source.js';
import type { ModelMemory, PendingReplica, PlacementNode, PortRange } from '../../../placement/types.js';
import { agentReconnectMaxMs } from '../../../protocol/agent-protocol.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { Store } from '../../../store/store.js';
import type { Catalog } from '../../state/catalog.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import type { SettingsHolder } from '../../state/settings-holder.js';

import type { FleetPlanInput, PlanRollout } from './fleet-plan.js';
import { hostOf } from './node-host.js';
import type { Placed } from './placed.js';
import type { ReplicaKeys } from './replica-keys.js';
import type { ReplicaViews } from './replica-views.js';
import type { AgentReports } from './reports.js';

/** The specs placement may place, those that wait for their source, and each model's memory. */
export interface ResolvedSpecs {
  specs: ModelSpec[];
  unresolved: PendingReplica[];
  memory: Map<string, ModelMemory>;
}

/** What planning reads besides the store: the catalog, the nodes and what their agents said. */
export interface PlanSources {
  catalog: Catalog;
  registry: NodeRegistry;
  settings: SettingsHolder;
  placed: Placed;
  reports: AgentReports;
  views: ReplicaViews;
  keys: ReplicaKeys;
  scaledReplicas?: ((spec: ModelSpec) => number | undefined) | undefined;
}

/**
 * The specs placement may place: a model fetched from the hub or a URL only once its source
 * resolved to pinned files (agents download nothing else). Those not resolved yet wait, with why.
 * Notes each origin and the catalog's blobs in `placed` (the agents are told them).
 */
export async function resolvedSpecs(o: PlanSources): Promise<ResolvedSpecs> {
  const models = await o.catalog.list();
  const specs: ModelSpec[] = [];
  const unresolved: PendingReplica[] = [];
  const memory = new Map<string, ModelMemory>();
  const blobs = new Set<string>();
  for (const { metadata: _m, status, ...written } of models) {
    const scaled = o.scaledReplicas?.(written);
    const spec = scaled === undefined ? written : { ...written, replicas: scaled };
    const origin = status.origin;
    // Placement asks the memory planner where a replica fits once the shape is known.
    if (status.shape !== undefined) memory.set(spec.name, { shape: status.shape, files: origin?.files });
    if (origin !== undefined) {
      o.placed.origins.set(spec.source, origin);
      for (const f of origin.files) blobs.add(blobKey(origin, f));
    }
    if (origin === undefined && parseSource(spec.source).kind !== 'path') {
      if (spec.replicas > 0)
        unresolved.push({
          model: spec.name,
          count: spec.replicas,
          reason:
            status.problem === undefined
              ? `its source ${spec.source} is being resolved to pinned files`
              : `its source has not resolved: ${status.problem}`,
        });
      continue;
    }
    specs.push(spec);
  }
  o.placed.catalogBlobs = [...blobs].sort();
  return { specs, unresolved, memory };
}

/** What planning reads, from the store (`tx`) and what the nodes said: one assembly for placement and its dry runs. */
export async function planInput(
  o: PlanSources,
  tx: Store,
  resolved: { specs: readonly ModelSpec[]; memory: FleetPlanInput['memory'] },
  now: number,
): Promise<FleetPlanInput> {
  const settings = o.settings.current.settings;
  const views = o.registry.views();
  const [first, last] = settings.placement.ports.split('-').map(Number) as [number, number];
  const replicas = await tx.fleet.replicas();
  const shards = await tx.fleet.shards();
  const rollouts = new Map<string, PlanRollout>((await tx.rollouts.list()).map((r) => [r.model, r]));
  const { ready, portTaken } = o.reports.reportedOf(shards, views, o.views);
  return {
    specs: resolved.specs,
    memory: resolved.memory,
    replicas,
    shards,
    nodes: views.map((v) => ({
      node: placementNode(v, {
        portsTaken: o.reports.portsTaken(v.id),
        heard: o.reports.heard(v.id) || !o.registry.isConnected(v.id),
      }),
      lastSeen: Date.parse(v.last_seen),
    })),
    ready,
    unkeyed: new Set(replicas.filter((r) => o.keys.keyOf(r) === undefined).map((r) => r.id)),
    portTaken,
    now,
    upSince: o.registry.upSince,
    lostAfterS: settings.placement.node_lost_after_s,
    reconnectS: agentReconnectMaxMs / 1000,
    ports: { first, last },
    cpuThreads: settings.placement.cpu_threads,
    rollouts,
  };
}

/** A node as placement sees it; `heard`: its agent has said what runs there and which ports are taken. */
function placementNode(v: NodeView, o: { portsTaken: readonly PortRange[]; heard: boolean }): PlacementNode {
  return {
    name: v.name,
    ready: v.state === 'ready' && o.heard,
    devices: v.devices,
    excluded: v.excluded,
    cpus: v.host.cpus.count,
    memory_mib: v.host.memory.total_mib,
    address: hostOf(v.address),
    ports_taken: o.portsTaken,
  };
}
