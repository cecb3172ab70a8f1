/** How the API shows replicas; shared by the server and its clients. */
import type { DownloadProgress } from './agent-protocol.js';

/** downloading: the model's files are being fetched onto its node(s) before the engine starts. */
export type ReplicaState =
  'pending' | 'downloading' | 'starting' | 'ready' | 'degraded' | 'failed' | 'unknown';

/** The executable an engine the agent installs runs from on a node, and why that one (agent/llama-bin.ts). */
export interface EngineBinView {
  /** installed, configured, path; waiting: shards wait; none: they are refused. */
  source: string;
  path?: string;
  why: string;
}

export interface ShardView {
  rank: number;
  node: string;
  /** As people read them: `0`, `0/mig1`; empty on CPU. */
  devices: string[];
  port: number;
  threads?: number;
  state: ReplicaState | 'stopping';
  reason?: string;
  /** Failed, and its agent starts it again by itself at this time (ISO). */
  restart_at?: string;
  /** While downloading: bytes done and total, rate and time left. */
  download?: DownloadProgress;
  pid?: number;
  /** A process shard of an engine the agent installs: which binary its node runs, and why. */
  engine_bin?: EngineBinView;
  restarts: number;
  ready_since?: string;
  last_exit?: { code: number | null; signal: string | null; at: string; log_tail: string[] };
}

export interface ReplicaView {
  /** null for a replica that waits for room (it has no id until it is placed). */
  id: string | null;
  model: string;
  /** null while it waits for room with no profile chosen yet (a successor waits on its predecessor's). */
  profile: string | null;
  /** The profile's engine; for one waiting for room, the first profile's; null if the model is gone. */
  engine: string | null;
  state: ReplicaState;
  reason?: string;
  /** Failed, and every failed shard is started again by itself, the last at this time (ISO). */
  restart_at?: string;
  /** While downloading: over all its shards. */
  download?: DownloadProgress;
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
