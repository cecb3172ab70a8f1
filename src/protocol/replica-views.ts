/** How the API shows replicas; shared by the server and its clients. */

export type ReplicaState = 'pending' | 'starting' | 'ready' | 'degraded' | 'failed' | 'unknown';

export interface ShardView {
  rank: number;
  node: string;
  /** As people read them: `0`, `0/mig1`; empty on CPU. */
  devices: string[];
  port: number;
  threads?: number;
  state: ReplicaState | 'stopping';
  reason?: string;
  pid?: number;
  restarts: number;
  ready_since?: string;
  last_exit?: { code: number | null; signal: string | null; at: string; log_tail: string[] };
}

export interface ReplicaView {
  /** null for a replica that waits for room (it has no id until it is placed). */
  id: string | null;
  model: string;
  /** null while it waits for room: no profile is chosen yet. */
  profile: string | null;
  /** The profile's engine; for one waiting for room, the first profile's; null if the model is gone. */
  engine: string | null;
  state: ReplicaState;
  reason?: string;
  /** The node of rank 0: where the API is. */
  node?: string;
  ready_since?: string;
  restarts: number;
  /** Where the gateway reaches it. */
  endpoint?: string;
  /** Being replaced: it stops once its successor is ready. */
  retiring?: boolean;
  created_at?: string;
  shards: ShardView[];
}

export interface RestartResult {
  replica: string;
  /** `surge`: a new one starts beside it, and it stops once that is ready. `in-place`: stopped first. */
  mode: 'surge' | 'in-place';
  message: string;
}
