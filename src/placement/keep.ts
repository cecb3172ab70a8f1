import type { ModelSpec } from '../catalog/model-spec.js';

import type { Shard } from './types.js';

/** One existing replica: its shards, in input order. */
export interface KeptReplica {
  model: string;
  id: string;
  shards: Shard[];
}

export interface Kept {
  /** Kept shards, in input order. */
  shards: Shard[];
  /** Shards of replicas that go: model gone, or beyond spec.replicas. In input order. */
  remove: Shard[];
  replicas: KeptReplica[];
  /** Kept replicas per model. */
  counts: Map<string, number>;
}

/**
 * Decides which existing replicas stay. All shards of a replica share its fate, so a
 * multi-node replica is never cut in half. On scale-down the replicas to stop are chosen
 * as a Kubernetes ReplicaSet does: first those with a shard on a node that is not ready
 * (or no longer known), since they serve nothing now; then the newest, read as the highest
 * replica id in natural order (`m-10` after `m-9`), since the oldest have warm caches and
 * clients routed to them.
 */
export function keepShards(
  shards: readonly Shard[],
  models: ReadonlyMap<string, ModelSpec>,
  ready: (node: string) => boolean,
): Kept {
  const byModel = new Map<string, Map<string, KeptReplica>>();
  for (const s of shards) {
    let replicas = byModel.get(s.model);
    if (replicas === undefined) {
      replicas = new Map();
      byModel.set(s.model, replicas);
    }
    let r = replicas.get(s.replica);
    if (r === undefined) {
      r = { model: s.model, id: s.replica, shards: [] };
      replicas.set(s.replica, r);
    }
    r.shards.push(s);
  }

  const going = new Set<KeptReplica>();
  const kept: KeptReplica[] = [];
  const counts = new Map<string, number>();
  for (const [model, replicas] of byModel) {
    const all = [...replicas.values()];
    const wanted = Math.max(0, models.get(model)?.replicas ?? 0);
    if (all.length <= wanted) {
      kept.push(...all);
      counts.set(model, all.length);
      continue;
    }
    const healthy = (r: KeptReplica) => r.shards.every((s) => ready(s.node));
    const order = all
      .map((r) => ({ r, healthy: healthy(r) }))
      .sort((a, b) => Number(a.healthy) - Number(b.healthy) || naturalCompare(b.r.id, a.r.id));
    const stop = new Set(order.slice(0, all.length - wanted).map((o) => o.r));
    for (const r of all) {
      if (stop.has(r)) going.add(r);
      else kept.push(r);
    }
    counts.set(model, wanted);
  }

  const keptShards: Shard[] = [];
  const remove: Shard[] = [];
  const goingShards = new Set<Shard>();
  for (const r of going) for (const s of r.shards) goingShards.add(s);
  for (const s of shards) (goingShards.has(s) ? remove : keptShards).push(s);
  return { shards: keptShards, remove, replicas: kept, counts };
}

/**
 * Compares ids with runs of digits read as numbers, so `m-9` comes before `m-10`. Ties
 * (`m-01` and `m-1`) fall back to plain code-unit order, so the order is total.
 */
export function naturalCompare(a: string, b: string): number {
  const chunk = /(\d+)|(\D+)/g;
  const as = a.match(chunk) ?? [];
  const bs = b.match(chunk) ?? [];
  const n = Math.min(as.length, bs.length);
  for (let i = 0; i < n; i++) {
    const x = as[i] ?? '';
    const y = bs[i] ?? '';
    const xd = x.charCodeAt(0) >= 48 && x.charCodeAt(0) <= 57;
    const yd = y.charCodeAt(0) >= 48 && y.charCodeAt(0) <= 57;
    let c: number;
    if (xd && yd) {
      // Digit runs of any length: strip leading zeros, then the longer is the larger.
      const xs = x.replace(/^0+/, '');
      const ys = y.replace(/^0+/, '');
      c = xs.length - ys.length || plainCompare(xs, ys);
    } else {
      c = plainCompare(x, y);
    }
    if (c !== 0) return c;
  }
  return as.length - bs.length || plainCompare(a, b);
}

function plainCompare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
