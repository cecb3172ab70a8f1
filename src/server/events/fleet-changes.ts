import type { PendingReplica, Shard } from '../../placement/types.js';
import type { ShardStatusWire } from '../../protocol/agent-protocol.js';
import type { ReplicaRecord, RolloutRecord } from '../../store/store.js';

import type { EventPublisher } from './event-hub.js';

/** The fleet's placement as one pass left it. */
export interface PlacementView {
  replicas: readonly ReplicaRecord[];
  shards: readonly Shard[];
  pending: readonly PendingReplica[];
  rollouts: ReadonlyMap<string, RolloutRecord>;
}

export interface PlacementChanges {
  /** Replicas placed, removed, retired or moved. */
  replicas: string[];
  /** Models of those replicas, and models whose pending replicas (or their reason) changed. */
  models: string[];
  /** Models whose rollout started or ended. */
  rollouts: string[];
}

/** What one placement pass changed, for the `replicas` and `rollouts` events. */
export function placementChanges(before: PlacementView, after: PlacementView): PlacementChanges {
  const replicas = new Set<string>();
  const models = new Set<string>();
  const was = byKey(before.replicas, (r) => r.id);
  const is = byKey(after.replicas, (r) => r.id);
  const shardsWas = shardsByReplica(before.shards);
  const shardsIs = shardsByReplica(after.shards);
  for (const id of new Set([...was.keys(), ...is.keys()])) {
    const a = was.get(id);
    const b = is.get(id);
    if (JSON.stringify(a) === JSON.stringify(b) && shardsWas.get(id) === shardsIs.get(id)) continue;
    replicas.add(id);
    models.add((b ?? a)?.model ?? '');
  }
  const pendingWas = byKey(before.pending, (p) => p.model);
  const pendingIs = byKey(after.pending, (p) => p.model);
  for (const model of new Set([...pendingWas.keys(), ...pendingIs.keys()]))
    if (JSON.stringify(pendingWas.get(model)) !== JSON.stringify(pendingIs.get(model))) models.add(model);
  models.delete('');
  const rollouts: string[] = [];
  for (const model of new Set([...before.rollouts.keys(), ...after.rollouts.keys()]))
    if (JSON.stringify(before.rollouts.get(model)) !== JSON.stringify(after.rollouts.get(model)))
      rollouts.push(model);
  return { replicas: [...replicas].sort(), models: [...models].sort(), rollouts: rollouts.sort() };
}

/** Replicas whose shards' reported status changed (state, reason, download progress, restarts). */
export function statusChanges(
  before: ReadonlyMap<string, { status: ShardStatusWire }>,
  after: ReadonlyMap<string, { status: ShardStatusWire }>,
): string[] {
  const changed = new Set<string>();
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    const a = before.get(key)?.status;
    const b = after.get(key)?.status;
    if (JSON.stringify(a) !== JSON.stringify(b)) changed.add((b ?? a)?.replica ?? '');
  }
  changed.delete('');
  return [...changed].sort();
}

function byKey<T>(items: readonly T[], key: (t: T) => string): Map<string, T> {
  return new Map(items.map((t) => [key(t), t]));
}

function shardsByReplica(shards: readonly Shard[]): Map<string, string> {
  const out = new Map<string, Shard[]>();
  for (const s of shards) out.set(s.replica, [...(out.get(s.replica) ?? []), s]);
  return new Map([...out].map(([id, list]) => [id, JSON.stringify(list.sort((x, y) => x.rank - y.rank))]));
}

/** A placement pass's changes as `replicas` and `rollouts` events (none when nothing changed). */
export function publishPlacement(events: EventPublisher, before: PlacementView, after: PlacementView): void {
  const c = placementChanges(before, after);
  if (c.replicas.length > 0 || c.models.length > 0)
    events.publish('replicas', { replicas: c.replicas, models: c.models });
  if (c.rollouts.length > 0) events.publish('rollouts', { models: c.rollouts });
}

/** Shards' statuses changed: a `replicas` event, and a `rollouts` one for a rolling model (its progress). */
export function publishStatuses(
  events: EventPublisher,
  replicas: readonly string[],
  view: PlacementView,
): void {
  if (replicas.length === 0) return;
  const ids = new Set(replicas);
  const models = [...new Set(view.replicas.filter((r) => ids.has(r.id)).map((r) => r.model))].sort();
  events.publish('replicas', { replicas, models });
  const rolling = models.filter((m) => view.rollouts.get(m)?.state === 'rolling');
  if (rolling.length > 0) events.publish('rollouts', { models: rolling });
}

/** A node's downloads progressed: a `replicas` event for the replicas of those models. */
export function publishDownloads(
  events: EventPublisher,
  downloads: readonly { model: string }[],
  view: PlacementView,
): void {
  const models = new Set(downloads.map((d) => d.model));
  if (models.size === 0) return;
  const replicas = view.replicas.filter((r) => models.has(r.model)).map((r) => r.id);
  events.publish('replicas', { replicas, models: [...models] });
}
