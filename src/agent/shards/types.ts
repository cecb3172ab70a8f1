import type { ProcessSpec } from '../../engines/types.js';
import type { DownloadProgress } from '../../protocol/agent-protocol.js';
import type { ContainerRun } from './container/types.js';

/**
 * What the supervisor runs: for each shard placed on this node, its processes, how to
 * tell it is ready, and how to stop it. The agent builds these from assignments (engine
 * commands); the supervisor keeps the processes running to match.
 */

export interface ShardRun {
  /** Unique on the node: `${replica}/${rank}`. */
  key: string;
  replica: string;
  rank: number;
  /** The engine's processes; one for every engine llmgw launches today. */
  processes: ProcessSpec[];
  /**
   * Set when the profile runs as a container (`runtime: container`): the one process's
   * command is the container's entrypoint and arguments, run by the container supervisor.
   */
  container?: ContainerRun;
  /** HTTP readiness, for ranks that serve the API; absent: ready once alive for `settleMs`. */
  health?: {
    /** `http://127.0.0.1:PORT/health`. */
    url: string;
    /** llama.cpp answers 503 while loading; vLLM and SGLang refuse connections until ready. */
    loading: 'answers-503' | 'refuses-connections';
    /** Sent as a Bearer key (llama.cpp needs none for /health, the others may). */
    apiKey?: string;
  };
  /** On a GPU placement: the devices (CUDA uuids) whose memory the engine should hold once ready. */
  gpu?: { uuids: string[] };
  /**
   * Set when the engine is known to run on the CPU despite a GPU placement (a llama.cpp
   * build that lists no GPU): the shard is degraded from the start, with this reason.
   */
  degradedReason?: string;
  /** SIGTERM, then SIGKILL after this long. */
  stopGraceMs: number;
}

/** The lifecycle's timings, defaults resolved (a driver's own are its options). */
export interface ShardTiming {
  backoff: { initialMs: number; maxMs: number };
  startingIntervalMs: number;
  readyIntervalMs: number;
  readyTimeoutMs: number;
  settleMs: number;
  gpuCheckDelayMs: number;
  gpuCheckIntervalMs: number;
  /** A run that stayed ready this long resets the backoff. */
  stableMs: number;
}

/** `downloading`: a container's image is being pulled (a process shard never reads so). */
export type ShardState = 'starting' | 'downloading' | 'ready' | 'degraded' | 'failed' | 'stopping';

export interface ExitReport {
  code: number | null;
  signal: string | null;
  at: string;
  /** The last lines the process wrote (stdout and stderr), for the exit's cause. */
  log_tail: string[];
}

export interface ShardStatus {
  key: string;
  replica: string;
  rank: number;
  state: ShardState;
  /** Why it is degraded, failed or still starting, in words a user acts on. */
  reason?: string;
  /**
   * Failed, and its supervisor starts it again by itself at this time (ISO): set only with
   * `failed`, and never where the next try waits for someone to act.
   */
  restart_at?: string;
  pid?: number;
  /** Restarts since the shard was started here. */
  restarts: number;
  ready_since?: string;
  last_exit?: ExitReport;
  /** Set while the shard cannot start because another program listens on its port: the control plane moves it. */
  port_taken?: PortTaken;
  /** While `downloading`: the image pull's progress, shown like a model download. */
  download?: DownloadProgress;
}

/** A shard's port, held by a program that is not one of this agent's engines. */
export interface PortTaken {
  port: number;
  /** The holder, when this agent can see it. */
  pid?: number;
  name?: string;
}

/** Which processes hold memory on which GPU (CUDA uuid -> pids), from discovery. */
export type GpuProcessReader = () => Promise<Map<string, number[]>>;

/**
 * What the agent needs of a supervisor of shards, whichever driver runs them: the process
 * supervisor and the container supervisor have these same methods.
 */
export interface ShardRunner {
  /** The shards wanted now; the rest are stopped. */
  apply(desired: readonly ShardRun[]): void;
  statuses(): ShardStatus[];
  /** The last `tail` lines of a shard's log (stdout and stderr, in order). */
  logs(key: string, tail?: number): string[];
  follow(key: string, listener: (line: string) => void): () => void;
  /** Resolves when every shard being stopped is gone. */
  stopped(): Promise<void>;
  stopAll(): Promise<void>;
  /** Leaves the engines running for the next agent to adopt. */
  detach(): Promise<void>;
}
