import type { ModelSpec } from '../../../catalog/model-spec.js';
import type { RolloutRecord } from '../../../store/store.js';

import { rollsTo, runsAsSpecified, type PlanReplica } from './fleet-plan.js';

export interface RolloutProgress {
  /** Replicas made since the roll started that run the change and are ready, of `total`. */
  replaced: number;
  total: number;
  /** Set when the rollout ends now. */
  end?: { state: 'done' } | { state: 'failed'; error: string };
}

/**
 * How far a rolling change is, from the model's replicas after a placement pass. Done once as
 * many replicas made since it started run the change and are ready as it replaces (those that
 * ran something else when it started; one for a restart), none is being replaced and none runs anything else. Failed
 * when a replica made since it started, running the change, failed (its engine exited, or its
 * files could not be fetched), with that replica and its engine's last error; or when the model
 * was changed again before it was done.
 */
export function rolloutProgress(
  rollout: Pick<RolloutRecord, 'spec' | 'replaces' | 'started_at'>,
  spec: ModelSpec,
  replicas: readonly Pick<PlanReplica, 'id' | 'model' | 'profile' | 'spec' | 'created_at' | 'retiring'>[],
  o: { isReady: (id: string) => boolean; failure: (id: string) => string | undefined },
): RolloutProgress {
  // Scaled down meanwhile: fewer to replace.
  const total = Math.min(rollout.replaces, spec.replicas);
  const mine = replicas.filter((r) => r.model === spec.name);
  const successors = mine.filter(
    (r) => r.created_at >= rollout.started_at && runsAsSpecified(r, rollout.spec),
  );
  const replaced = Math.min(total, successors.filter((r) => o.isReady(r.id)).length);
  const progress = { replaced, total };
  if (!rollsTo(rollout, spec))
    return {
      ...progress,
      end: {
        state: 'failed',
        error: `model ${spec.name} was changed again before this change was done: the newer change rolls on`,
      },
    };
  if (replaced >= total && mine.every((r) => !r.retiring && runsAsSpecified(r, rollout.spec)))
    return { ...progress, end: { state: 'done' } };
  for (const r of successors) {
    const why = o.failure(r.id);
    if (why !== undefined) return { ...progress, end: { state: 'failed', error: `replica ${r.id}: ${why}` } };
  }
  return progress;
}
