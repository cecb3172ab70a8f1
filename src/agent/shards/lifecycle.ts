import type { DownloadProgress } from '../../protocol/agent-protocol.js';
import type { AttemptContext, Claim, Ending, Instance, ShardDriver } from './driver.js';
import { noGpuMemoryReason, watchGpuMemory } from './gpu-check.js';
import type { LogBuffer } from './log-buffer.js';
import {
  describeProbe,
  formatMs,
  probeHealth,
  probeTimeout,
  startingReason,
  watchHealth,
} from './readiness.js';
import { backoffMs } from './restart-backoff.js';
import type {
  ExitReport,
  GpuProcessReader,
  PortTaken,
  ShardRun,
  ShardState,
  ShardStatus,
  ShardTiming,
} from './types.js';
import { aborted, never, wait } from './wait.js';

export interface ShardContext<I extends Instance> {
  driver: ShardDriver<I>;
  log: LogBuffer;
  timing: ShardTiming;
  onStatus: (status: ShardStatus) => void;
  gpuProcesses: GpuProcessReader | undefined;
  now: () => number;
}

type Outcome = { kind: 'stop' } | { kind: 'exit' } | { kind: 'recycle'; reason: string };

interface SetExtra {
  portTaken?: PortTaken | undefined;
  restartAt?: number | undefined;
  download?: DownloadProgress | undefined;
}

/**
 * One shard's engine, kept running whatever its driver: start (or take over), wait until
 * ready, watch its health and GPU memory, and after each failure end it and start again
 * with backoff, until stopped. All of it happens in one loop (`#loop`), so an attempt's
 * engine is always gone before the next one starts.
 */
export class Shard<I extends Instance> {
  #run: ShardRun;
  readonly hash: string;
  readonly #ctx: ShardContext<I>;
  readonly #stopper = new AbortController();
  #done: Promise<void> = Promise.resolve();
  #state: ShardState = 'starting';
  #reason: string | undefined;
  /** While failed with a restart coming by itself: when (ms, the context's clock). */
  #restartAt: number | undefined;
  #download: DownloadProgress | undefined;
  #pid: number | undefined;
  #restarts = 0;
  /** Failures since the last stable run: the exponent of the backoff. */
  #failures = 0;
  #readySince: number | undefined;
  #lastExit: ExitReport | undefined;
  #portTaken: PortTaken | undefined;
  #lastEmitted = '';
  /** Set by detach(): the engine is left running for the next agent. */
  #detached = false;
  /** Whether the first attempt has been through its first readiness check (or ended). */
  #checked = false;

  constructor(run: ShardRun, hash: string, ctx: ShardContext<I>) {
    this.#run = run;
    this.hash = hash;
    this.#ctx = ctx;
  }

  get key(): string {
    return this.#run.key;
  }

  /** Takes fields that need no restart (the stop grace). */
  update(run: ShardRun): void {
    this.#run = run;
  }

  /**
   * Starts the loop, once `after` (the previous engine of this key stopping) has settled
   * when given; `claim` tells the engine an earlier agent left for this very run.
   */
  start(after: Promise<void> | undefined, claim: Claim<I>): void {
    this.#done = this.#loop(after, claim).catch((e: unknown) => {
      // A bug here must not leave the shard looking alive.
      this.#set('failed', `the supervisor failed: ${e instanceof Error ? e.message : String(e)}`);
    });
  }

  /** Whether the first attempt has had its first readiness check (or ended): its state is then known. */
  get checked(): boolean {
    return this.#checked;
  }

  /** Stops watching and leaves the engine running for the next agent; resolves once the loop has ended. */
  detach(): Promise<void> {
    this.#detached = true;
    this.#stopper.abort();
    return this.#done;
  }

  /** Stops the engine (its grace, then forced) and resolves once it is gone. */
  stop(): Promise<void> {
    if (!this.#stopper.signal.aborted) {
      this.#set('stopping', undefined);
      this.#stopper.abort();
    }
    return this.#done;
  }

  status(): ShardStatus {
    const s: ShardStatus = {
      key: this.#run.key,
      replica: this.#run.replica,
      rank: this.#run.rank,
      state: this.#state,
      restarts: this.#restarts,
    };
    if (this.#reason !== undefined) s.reason = this.#reason;
    if (this.#restartAt !== undefined) s.restart_at = new Date(this.#restartAt).toISOString();
    if (this.#download !== undefined && this.#state === 'downloading') s.download = this.#download;
    if (this.#pid !== undefined) s.pid = this.#pid;
    if (this.#readySince !== undefined) s.ready_since = new Date(this.#readySince).toISOString();
    if (this.#lastExit !== undefined) s.last_exit = this.#lastExit;
    if (this.#portTaken !== undefined) s.port_taken = this.#portTaken;
    return s;
  }

  async #loop(after: Promise<void> | undefined, claim: Claim<I>): Promise<void> {
    const stop = this.#stopper.signal;
    if (after !== undefined) {
      this.#set('starting', `waiting for ${this.#ctx.driver.previousWords}`);
      await Promise.race([after, aborted(stop)]);
    }
    if (this.#stopping()) return;
    if (this.#run.processes.length === 0) {
      this.#set('failed', 'the shard has no process to run: its engine gave no command');
      return;
    }
    // Kept synchronous where the driver knows at once, so the status says so right after apply.
    let adopted =
      claim.adopted ??
      (claim.later === undefined
        ? undefined
        : await Promise.race([claim.later(), aborted(stop).then(() => undefined)]));
    while (!this.#stopping()) {
      const ending = await this.#attempt(adopted);
      adopted = undefined;
      // An exit may race a stop: the stop wins.
      if (ending === undefined || this.#stopping()) return;
      const now = this.#ctx.now();
      const next = this.#nextAttempt(now);
      this.#failures = next.failures;
      this.#readySince = undefined;
      this.#pid = undefined;
      if (ending.retry === 'final') {
        this.#set('failed', ending.reason, { portTaken: ending.portTaken });
        return;
      }
      const delay = ending.retry ?? next.delay;
      if (ending.retry === undefined) this.#failures++;
      if (ending.ran === true) this.#restarts++;
      // A refusal is tried again after a while, but waits for someone to act: no restart is coming.
      this.#set(
        'failed',
        `${ending.reason}; ${ending.retry === undefined ? 'restarting' : 'trying again'} in ${formatMs(delay)}`,
        { portTaken: ending.portTaken, restartAt: ending.retry === undefined ? now + delay : undefined },
      );
      if (!(await wait(delay, stop))) return;
    }
  }

  /** For a run that ends at `now`: the failures its backoff counts (none after a stable run), and its wait. */
  #nextAttempt(now: number): { failures: number; delay: number } {
    const stable = this.#readySince !== undefined && now - this.#readySince >= this.#ctx.timing.stableMs;
    const failures = stable ? 0 : this.#failures;
    return { failures, delay: backoffMs(failures, this.#ctx.timing.backoff) };
  }

  #attemptContext(): AttemptContext {
    const current = (): ShardRun => this.#run;
    return {
      get run() {
        return current();
      },
      hash: this.hash,
      log: this.#ctx.log,
      signal: this.#stopper.signal,
      set: (state, reason, extra) => {
        this.#set(state, reason, extra);
      },
    };
  }

  /** One engine, from its start (or adoption) to its end. Undefined when it ended because the shard stops. */
  async #attempt(adopted: I | undefined): Promise<Ending | undefined> {
    const a = this.#attemptContext();
    let instance: I;
    if (adopted !== undefined) {
      instance = adopted;
      this.#pid = instance.pid;
      this.#set('starting', 'adopted from the previous agent: checking its health');
    } else {
      const made = await this.#ctx.driver.start(a);
      if (made === undefined) return undefined;
      if ('reason' in made) return this.#stopping() ? undefined : made;
      instance = made;
    }
    await instance.take(a, adopted !== undefined);
    this.#pid = instance.pid;
    this.#emit();

    const attempt = new AbortController();
    const signal = AbortSignal.any([this.#stopper.signal, attempt.signal]);
    const outcome = await Promise.race<Outcome>([
      // The attempt's signal, not the shard's: it is aborted below, so no listener outlives the attempt.
      aborted(signal).then(() => ({ kind: 'stop' as const })),
      instance.exited().then(() => ({ kind: 'exit' as const })),
      this.#watch(instance, signal, adopted !== undefined).then((reason) => ({
        kind: 'recycle' as const,
        reason,
      })),
    ]);
    attempt.abort();
    this.#checked = true;
    if (outcome.kind === 'stop' && this.#detached) {
      // Left running for the next agent: nothing here waits for it.
      await instance.release();
      return undefined;
    }
    // Its engine stops first, then the backoff: a restart comes no sooner than this.
    if (outcome.kind === 'recycle') {
      const now = this.#ctx.now();
      this.#set('failed', outcome.reason, { restartAt: now + this.#nextAttempt(now).delay });
    }
    const { ending, lastExit } = await instance.end(outcome.kind, {
      ...(outcome.kind === 'recycle' ? { reason: outcome.reason } : {}),
      wasReady: this.#readySince !== undefined,
    });
    if (lastExit !== undefined) this.#lastExit = lastExit;
    return outcome.kind === 'stop' ? undefined : ending;
  }

  /**
   * Readiness, then health while ready. Resolves with a reason to restart the shard
   * (never ready in time, stopped answering); never resolves otherwise.
   */
  async #watch(instance: I, signal: AbortSignal, adopted: boolean): Promise<string> {
    const { timing, now } = this.#ctx;
    const health = this.#run.health;
    const deadline = now() + timing.readyTimeoutMs;
    if (health === undefined) {
      // An adopted rank has run a while already.
      if (!adopted && !(await wait(timing.settleMs, signal))) return never();
    } else {
      for (;;) {
        const answer = await probeHealth(health, probeTimeout(timing.startingIntervalMs));
        if (signal.aborted) return never();
        // Only the engine's own answer counts: another program on its port must not make it ready.
        const { probe, foreign } = instance.judge(answer, health);
        if (probe.kind === 'ok' && foreign === undefined) break;
        this.#checked = true;
        if (now() >= deadline) {
          return `not ready after ${formatMs(timing.readyTimeoutMs)} (last health check: ${foreign?.reason ?? describeProbe(probe, health)}); raise the ready timeout if the model loads slower than that`;
        }
        if (foreign !== undefined) this.#set('starting', foreign.reason, { portTaken: foreign.taken });
        else this.#set('starting', startingReason(probe, health));
        if (!(await wait(timing.startingIntervalMs, signal))) return never();
      }
    }
    this.#readySince = now();
    this.#checked = true;
    instance.ready();
    const degraded = this.#run.degradedReason;
    if (degraded !== undefined) this.#set('degraded', degraded);
    else this.#set('ready', undefined);
    if (degraded === undefined) this.#watchGpu(instance, signal);
    return health === undefined ? never() : watchHealth(health, timing.readyIntervalMs, signal);
  }

  /**
   * An engine that holds no memory on its GPUs (a CPU build or image, a runtime that did
   * not pass the devices) serves from the CPU: degraded until it does.
   */
  #watchGpu(instance: I, signal: AbortSignal): void {
    const uuids = this.#run.gpu?.uuids ?? [];
    const reader = this.#ctx.gpuProcesses;
    const pids = instance.gpuPids();
    if (uuids.length === 0 || reader === undefined || pids === undefined) return;
    const { timing } = this.#ctx;
    void watchGpuMemory({
      uuids,
      reader,
      pids,
      delayMs: timing.gpuCheckDelayMs,
      intervalMs: timing.gpuCheckIntervalMs,
      signal,
      onCheck: (holds) => {
        if (holds) this.#set('ready', undefined);
        else this.#set('degraded', noGpuMemoryReason(uuids, instance.noGpuFix));
      },
    });
  }

  #stopping(): boolean {
    return this.#stopper.signal.aborted;
  }

  /** `restartAt`: failed, and this loop starts it again then by itself. */
  #set(state: ShardState, reason: string | undefined, extra: SetExtra = {}): void {
    // Once stopping, only the stop speaks.
    if (this.#stopping() && state !== 'stopping') return;
    this.#state = state;
    this.#reason = reason;
    this.#portTaken = extra.portTaken;
    this.#restartAt = extra.restartAt;
    this.#download = extra.download;
    this.#emit();
  }

  #emit(): void {
    const status = this.status();
    const text = JSON.stringify(status);
    if (text === this.#lastEmitted) return;
    this.#lastEmitted = text;
    try {
      this.#ctx.onStatus(status);
    } catch {
      // The listener's failure must not stop the supervision.
    }
  }
}
