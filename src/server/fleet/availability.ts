import type { ReplicaState } from '../../protocol/replica-views.js';

/** A replica of one model, as much as its availability needs. */
export interface ReplicaOfModel {
  id: string;
  state: ReplicaState;
  reason?: string | undefined;
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
 * Why a model cannot serve now and will not by itself soon, or undefined while it serves or
 * may: a replica ready, downloading its files, starting, not placed yet, or on a node not heard from yet (an agent
 * reconnecting). The gateway refuses a model's requests at once with this reason, where
 * otherwise they wait or are told to retry.
 */
export function unavailableReason(m: ModelReplicas): string | undefined {
  if (m.replicas.some((r) => mayServe.has(r.state))) return undefined;
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
