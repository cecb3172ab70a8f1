import type { ReplicaRecord } from '../../../store/store.js';

type Retiring = Pick<ReplicaRecord, 'id' | 'model' | 'created_at' | 'retiring' | 'retiring_since'>;

/**
 * Which replicas being replaced may stop now. One of a model stops when its model
 * already has as many ready replicas as it wants without it, or when a replica of the
 * model made since it was marked is ready to take its place (each such successor stands
 * in for one old one; replicas that ran beside it before do not). Until then it keeps
 * serving: a restart or a roll never lowers the ready capacity.
 */
export function retirable<R extends Retiring>(
  replicas: readonly R[],
  isReady: (id: string) => boolean,
  wanted: (model: string) => number,
): R[] {
  const out: R[] = [];
  const byModel = new Map<string, R[]>();
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
      // Marked before retiring_since was recorded (store migration 0005): made since it was made.
      const since = old.retiring_since ?? old.created_at;
      const successor = fresh.find((f) => !used.has(f.id) && f.created_at >= since);
      if (successor !== undefined) {
        used.add(successor.id);
        out.push(old);
      }
    }
  }
  return out;
}

function byAge(a: Retiring, b: Retiring): number {
  return a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id);
}
