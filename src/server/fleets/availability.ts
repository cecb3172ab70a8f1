import type { ReplicaState } from '../../protocol/replica-views.js';
import type { CatalogEntry } from '../../protocol/routes.js';

/** A replica of one model, as much as its availability needs. */
export interface ReplicaOfModel {
  id: string;
  state: ReplicaState;
  reason?: string | undefined;
  /** Restarts of its engines by whoever launches them (the agent's supervisor, the kubelet). */
  restarts?: number | undefined;
  /** Failed, and its launcher starts it again by itself at this time (ISO). */
  restart_at?: string | undefined;
}

export interface ModelReplicas {
  model: string;
  /** Replicas the model asks for (its `replicas`). */
  wanted: number;
  replicas: readonly ReplicaOfModel[];
  /** Replicas placement found no room for. */
  pending?: { count: number; reason: string } | undefined;
}

/** States from which a replica serves, or may soon without anyone doing anything. */
const mayServe = new Set<ReplicaState>([
  'ready',
  'degraded',
  'downloading',
  'starting',
  'pending',
  'unknown',
]);

/**
 * Whether its launcher is bringing it back by itself after its engine failed: a restart is
 * due (`restart_at`), or it is loading again after one.
 */
function restarting(r: ReplicaOfModel): boolean {
  return (
    (r.state === 'failed' && r.restart_at !== undefined) || (r.state === 'starting' && (r.restarts ?? 0) > 0)
  );
}

/**
 * Why a model cannot serve now and will not by itself soon, or undefined while it serves or
 * may: a replica ready, downloading its files, starting, not placed yet, on a node not heard
 * from yet (an agent reconnecting), or failed with its restart coming. The gateway refuses a
 * model's requests at once with this reason, where otherwise they wait or are told to retry.
 */
export function unavailableReason(m: ModelReplicas): string | undefined {
  if (m.replicas.some((r) => mayServe.has(r.state) || restarting(r))) return undefined;
  const reasons: string[] = [];
  const failed = m.replicas.filter((r) => r.state === 'failed');
  const first = failed[0];
  if (first !== undefined) {
    const more = failed.length > 1 ? ` (and ${failed.length - 1} more failed)` : '';
    reasons.push(`replica ${first.id} failed${first.reason === undefined ? '' : `: ${first.reason}`}${more}`);
  }
  if (m.pending !== undefined && m.pending.count > 0) {
    reasons.push(
      `${m.pending.count === 1 ? '1 replica waits' : `${m.pending.count} replicas wait`} for room: ${m.pending.reason}`,
    );
  }
  if (reasons.length > 0) return reasons.join('; ');
  // Nothing placed and nothing waiting: placement has not run yet, unless none is wanted.
  return m.wanted === 0 && m.replicas.length === 0
    ? `it is scaled to 0 replicas (llmgw ctl model scale ${m.model} 1)`
    : undefined;
}

/**
 * Whether a model none of whose replicas serves is coming back by itself: one of them is
 * being started again after its engine failed. Then the gateway holds its requests in the
 * queue for it rather than refusing them. `at`: the soonest restart due, when none is
 * loading again already.
 */
export function restartingOf(m: Pick<ModelReplicas, 'replicas'>): CatalogEntry['restarting'] {
  if (m.replicas.some((r) => r.state === 'ready' || r.state === 'degraded')) return undefined;
  const back = m.replicas.filter(restarting);
  const loading = back.find((r) => r.state === 'starting');
  if (loading !== undefined)
    return {
      reason: `replica ${loading.id} is starting again after its engine failed${loading.reason === undefined ? '' : `: ${loading.reason}`}`,
    };
  let soonest: ReplicaOfModel | undefined;
  for (const r of back)
    if (soonest === undefined || Date.parse(r.restart_at ?? '') < Date.parse(soonest.restart_at ?? ''))
      soonest = r;
  if (soonest?.restart_at === undefined) return undefined;
  return {
    at: soonest.restart_at,
    reason: `replica ${soonest.id} failed${soonest.reason === undefined ? '' : `: ${soonest.reason}`}`,
  };
}
