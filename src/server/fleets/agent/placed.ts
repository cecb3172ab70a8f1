import type { ModelSpec } from '../../../catalog/model-spec.js';
import type { Origin } from '../../../models/origin.js';
import type { PendingReplica, Shard } from '../../../placement/types.js';
import type { ReplicaRecord, RolloutRecord } from '../../../store/store.js';
import type { PlacementView } from '../../events/fleet-changes.js';

/**
 * What the last placement pass left (this control plane's, or the leader's as read back): the
 * replicas and their shards, what waits, each model's latest rollout. Every part of the agent
 * fleet reads it; only placement writes it.
 */
export class Placed {
  /** The catalog as the last placement saw it. */
  specs = new Map<string, ModelSpec>();
  replicas: ReplicaRecord[] = [];
  shards: Shard[] = [];
  pending: PendingReplica[] = [];
  /** Each model's latest rollout, as the last placement read it. */
  rollouts = new Map<string, RolloutRecord>();
  /** Pinned origins by source, as resolved; kept for replicas of an older spec still running. */
  readonly origins = new Map<string, Origin>();
  /** Blob keys of every file of the catalog's models (agents evict the others first). */
  catalogBlobs: string[] = [];

  specOf(model: string): ModelSpec | undefined {
    return this.specs.get(model);
  }

  replica(id: string): ReplicaRecord | undefined {
    return this.replicas.find((r) => r.id === id);
  }

  view(): PlacementView {
    return { replicas: this.replicas, shards: this.shards, pending: this.pending, rollouts: this.rollouts };
  }
}
