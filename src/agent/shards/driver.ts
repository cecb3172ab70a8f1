import type { DownloadProgress } from '../../protocol/agent-protocol.js';
import type { LogBuffer } from './log-buffer.js';
import type { Health, Probe } from './readiness.js';
import type { ExitReport, PortTaken, ShardRun, ShardState } from './types.js';

/**
 * How a shard's engine is run: as processes of the agent (process/) or as a container of
 * the node's daemon (container/). The lifecycle (lifecycle.ts) and the supervisor
 * (supervisor.ts) are the same for both; a driver only starts, takes over, watches the
 * ownership of and ends one engine, and keeps what an earlier agent left.
 */

/** Why an attempt ended, and when the next one comes. */
export interface Ending {
  reason: string;
  /** Wait this long before the next attempt, instead of the backoff; `final`: no next attempt (the run must change). */
  retry?: number | 'final';
  /** An engine ran (or was tried): counts as a restart. */
  ran?: boolean;
  /** The shard's port, held by another program: the control plane moves the shard. */
  portTaken?: PortTaken;
}

/** What a driver may read and say of the shard whose engine it runs. */
export interface AttemptContext {
  /** The shard's run now (fields that need no restart, the stop grace, may change). */
  readonly run: ShardRun;
  readonly hash: string;
  readonly log: LogBuffer;
  /** Aborted when the shard stops (or detaches). */
  readonly signal: AbortSignal;
  set(
    state: ShardState,
    reason: string | undefined,
    extra?: { portTaken?: PortTaken | undefined; download?: DownloadProgress },
  ): void;
}

/** A health answer as the driver judges it: `foreign` when the answer is not the engine's own. */
export interface Judged {
  probe: Probe;
  foreign?: { reason: string; taken?: PortTaken | undefined } | undefined;
}

/** How an attempt ended, as the lifecycle saw it. */
export type EndKind = 'exit' | 'stop' | 'recycle';

/** One engine of a shard: started by its driver, or an earlier agent's taken over. */
export interface Instance {
  /** For the status: the engine's (first) pid, once taken up. */
  readonly pid: number | undefined;
  /** What to do when it holds no memory on its GPUs (it runs on the CPU): the advice differs per driver. */
  readonly noGpuFix: string;
  /** Called once as the lifecycle takes it up (adopted or new): its log followed, its record written. */
  take(a: AttemptContext, adopted: boolean): Promise<void>;
  /** Resolves when the engine ended by itself. */
  exited(): Promise<void>;
  judge(probe: Probe, health: Health): Judged;
  /** Its host pids now, for the GPU memory check; undefined where they cannot be known. */
  gpuPids(): (() => readonly number[]) | undefined;
  /** Once ready. */
  ready(): void;
  /** Leaves it running for the next agent (the agent exits for a restart or an upgrade). */
  release(): Promise<void>;
  /**
   * Stops it (unless it exited by itself) and says why the attempt ended: no ending for a
   * stop. `reason`: why it is recycled; `wasReady`: it was ready in this attempt.
   */
  end(
    how: EndKind,
    c: { reason?: string; wasReady: boolean },
  ): Promise<{ ending?: Ending; lastExit?: ExitReport }>;
}

/** What an earlier agent left for a key, as a shard of it is made. */
export interface Claim<I extends Instance> {
  /** The engine the shard takes over (it runs this very run), where known at once. */
  adopted?: I | undefined;
  /** Else, where the driver must ask first: asked once the shard may start. */
  later?: (() => Promise<I | undefined>) | undefined;
  /** Resolves once an earlier engine of the key that runs something else is gone. */
  replaced?: Promise<void> | undefined;
}

export interface ShardDriver<I extends Instance> {
  /** What a new shard of a key waits for while the old one stops: `the previous processes of this shard to exit`. */
  readonly previousWords: string;
  /** What makes a shard's engine what it is: a change restarts it. */
  hash(run: ShardRun): string;
  /** Throws, in words, for a run this driver cannot run. */
  check(run: ShardRun): void;
  /** A key's log, kept across its restarts and replacements. */
  log(run: ShardRun): LogBuffer;
  claim(run: ShardRun, hash: string, log: LogBuffer): Claim<I>;
  /** Starts a new engine: the instance, an ending when it could not, undefined when the shard stopped meanwhile. */
  start(a: AttemptContext): Promise<I | Ending | undefined>;
  /** Keys of engines an earlier agent left that no shard claimed yet. */
  unclaimed(): string[];
  /** Stops those whose key `keep` does not want; returns their keys. */
  releaseUnclaimed(keep: (key: string) => boolean): string[];
  /** Stops every engine an earlier agent left that no shard claimed. */
  discardLeftovers(): Promise<void>;
  /** Stops of leftovers in flight. */
  pending(): Promise<void>[];
  /** Stops background work (the orphan sweep). */
  close(): void;
  /** Leaves the unclaimed leftovers running for the next agent. */
  detach(): void;
}
