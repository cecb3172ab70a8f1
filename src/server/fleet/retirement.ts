import type { ReplicaRecord } from '../../store/store.js';

/**
 * Which replicas being replaced may stop now. One of a model stops when its model
 * already has as many ready replicas as it wants without it, or when a newer replica
 * of the model is ready to take its place (each newer one stands in for one old one).
 * Until then it keeps serving: a restart never lowers the ready capacity.
 */
export function retirable(replicas: readonly ReplicaRecord[], isReady: (id: string) => boolean, wanted: (model: string) => number): ReplicaRecord[] {
  const out: ReplicaRecord[] = [];
  const byModel = new Map<string, ReplicaRecord[]>();
  for (const r of replicas) byModel.set(r.model, [...(byModel.get(r.model) ?? []), r]);
  for (const [model, list] of byModel) {
    const retiring = list.filter((r) => r.retiring).sort(byAge);
    if (retiring.length === 0) continue;
    const fresh = list.filter((r) => !r.retiring && isReady(r.id)).sort(byAge);
    const used = new Set<string>();
    for (const old of retiring) {
      if (fresh.length >= wanted(model)) {
        out.push(old);
        continue;
      }
      const successor = fresh.find((f) => !used.has(f.id) && f.created_at >= old.created_at);
      if (successor !== undefined) {
        used.add(successor.id);
        out.push(old);
      }
    }
  }
  return out;
}

function byAge(a: ReplicaRecord, b: ReplicaRecord): number {
  return a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id);
}
