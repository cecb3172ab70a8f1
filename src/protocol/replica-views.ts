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
  /** `-` for a replica that waits for room. */
  id: string;
  model: string;
  profile: string;
  engine: string;
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
