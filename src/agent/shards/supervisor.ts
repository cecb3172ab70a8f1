import type { Instance, ShardDriver } from './driver.js';
import { Shard } from './lifecycle.js';
import type { LogBuffer } from './log-buffer.js';
import type { GpuProcessReader, ShardRun, ShardRunner, ShardStatus, ShardTiming } from './types.js';

/** The timings every driver's shards share; defaults in `shardTiming`. */
export interface TimingOptions {
  /** Restart backoff, exponential: default 1 s .. 60 s, reset after a run that stayed ready for `stableMs`. */
  backoff?: { initialMs: number; maxMs: number };
  /** A run ready this long resets the backoff (default 60 s). */
  stableMs?: number;
  /** Health checks while starting (default 500 ms). */
  healthIntervalMs?: number;
  /** Health checks once ready (default 5 s); three failures in a row restart the shard. */
  readyHealthIntervalMs?: number;
  /** Default 30 min (models load slowly); past it: restart with reason "not ready after …". */
  readyTimeoutMs?: number;
  /** Ranks without health checks: ready once alive this long (default 5 s). */
  settleMs?: number;
  /** After ready, how long to wait before checking GPU memory (default 10 s). */
  gpuCheckDelayMs?: number;
  /** Then how often to check it again (default 30 s). */
  gpuCheckIntervalMs?: number;
}

export function shardTiming(o: TimingOptions): ShardTiming {
  return {
    backoff: o.backoff ?? { initialMs: 1000, maxMs: 60_000 },
    startingIntervalMs: o.healthIntervalMs ?? 500,
    readyIntervalMs: o.readyHealthIntervalMs ?? 5000,
    readyTimeoutMs: o.readyTimeoutMs ?? 30 * 60_000,
    settleMs: o.settleMs ?? 5000,
    gpuCheckDelayMs: o.gpuCheckDelayMs ?? 10_000,
    gpuCheckIntervalMs: o.gpuCheckIntervalMs ?? 30_000,
    stableMs: o.stableMs ?? 60_000,
  };
}

export interface ShardSupervisorOptions extends TimingOptions {
  /** Called on every change of a shard's status: state, reason, pid, restarts, exits. */
  onStatus: (status: ShardStatus) => void;
  /**
   * Called when a stopped shard has left `statuses()` (its engine is gone), so the agent
   * can report the set again. No onStatus comes for the removal itself.
   */
  onRemoved?: ((key: string) => void) | undefined;
  /** Which pids hold memory on which GPU uuid, for the GPU memory check; absent: not checked. */
  gpuProcesses?: GpuProcessReader | undefined;
  now?: (() => number) | undefined;
}

/**
 * Keeps the shards placed on this node running as `apply` says, through one driver, and
 * reports how each one is doing.
 *
 * A stopped shard's status reads 'stopping' until its engine is gone; then it leaves
 * `statuses()` and `onRemoved` is called. A key that is stopping and desired again (or
 * whose run changed) starts its new engine only once the old one is gone, since they hold
 * the same port and GPU memory.
 */
export class ShardSupervisor<I extends Instance> implements ShardRunner {
  protected readonly driver: ShardDriver<I>;
  readonly #o: ShardSupervisorOptions;
  readonly #timing: ShardTiming;
  /** The desired shards, by key. */
  readonly #shards = new Map<string, Shard<I>>();
  /** Shards stopping (no longer desired, or replaced), until their engines are gone. */
  readonly #stopping = new Map<Shard<I>, Promise<void>>();
  /** Per key, kept across restarts and replacements, dropped once the key is gone. */
  readonly #logs = new Map<string, LogBuffer>();
  /** Keys whose shard took over an earlier agent's engine. */
  readonly #adoptedKeys = new Set<string>();

  constructor(driver: ShardDriver<I>, options: ShardSupervisorOptions) {
    this.driver = driver;
    this.#o = options;
    this.#timing = shardTiming(options);
  }

  /** Keys of engines an earlier agent started that wait to be claimed by a desired shard (or released). */
  unclaimed(): string[] {
    return this.driver.unclaimed();
  }

  /**
   * Stops the earlier agent's engines not claimed yet whose key `keep` does not want: the
   * control plane's first assignment does not place them here, or none came in time.
   * Returns the keys stopped.
   */
  releaseUnclaimed(keep: (key: string) => boolean = () => false): string[] {
    return this.driver.releaseUnclaimed(keep);
  }

  /**
   * Resolves once every shard that took over an engine has had its first health check (so
   * the state first reported is the engine's, not "checking"), or after `timeoutMs`.
   */
  async adoptedChecked(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const waiting = [...this.#adoptedKeys].some((k) => {
        const shard = this.#shards.get(k);
        return shard !== undefined && !shard.checked;
      });
      if (!waiting) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * Makes the running shards match `desired`: starts new keys, stops keys no longer
   * wanted, restarts a key whose engine changed (its driver's hash), and leaves the others
   * alone. Never waits for stops: `stopped()` does.
   */
  apply(desired: readonly ShardRun[]): void {
    const wanted = new Map<string, ShardRun>();
    for (const run of desired) {
      this.driver.check(run);
      if (wanted.has(run.key))
        throw new Error(`two shards with the key ${run.key}: each key names one shard on a node`);
      wanted.set(run.key, run);
    }
    for (const [key, shard] of this.#shards) {
      if (wanted.has(key)) continue;
      this.#shards.delete(key);
      this.#stop(shard);
    }
    for (const run of wanted.values()) {
      const hash = this.driver.hash(run);
      const current = this.#shards.get(run.key);
      if (current?.hash === hash) {
        current.update(run);
        continue;
      }
      if (current !== undefined) this.#stop(current);
      const log = this.#log(run);
      // An earlier agent's engine for this key: taken over when it runs this very run, else replaced.
      const claim = this.driver.claim(run, hash, log);
      if (claim.adopted !== undefined) this.#adoptedKeys.add(run.key);
      const previous = [...this.#stopping].filter(([s]) => s.key === run.key).map(([, done]) => done);
      if (claim.replaced !== undefined) previous.push(claim.replaced);
      const shard = new Shard<I>(run, hash, {
        driver: this.driver,
        log,
        timing: this.#timing,
        onStatus: this.#o.onStatus,
        gpuProcesses: this.#o.gpuProcesses,
        now: this.#o.now ?? Date.now,
      });
      this.#shards.set(run.key, shard);
      shard.start(previous.length === 0 ? undefined : Promise.all(previous).then(() => undefined), claim);
    }
  }

  statuses(): ShardStatus[] {
    const out = [...this.#shards.values()].map((s) => s.status());
    for (const shard of this.#stopping.keys()) if (!this.#shards.has(shard.key)) out.push(shard.status());
    return out;
  }

  /** The last `tail` lines of a shard's log (all kept when absent): stdout and stderr interleaved, each line as written. */
  logs(key: string, tail?: number): string[] {
    return this.#logs.get(key)?.tail(tail) ?? [];
  }

  /** Calls `listener` with each new log line of a shard until the returned function is called (a key not supervised: never). */
  follow(key: string, listener: (line: string) => void): () => void {
    return this.#logs.get(key)?.follow(listener) ?? (() => undefined);
  }

  /** Resolves when every shard that is stopping, and every leftover being stopped, is gone. */
  async stopped(): Promise<void> {
    for (;;) {
      const pending = [...this.#stopping.values(), ...this.driver.pending()];
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  /** Stops everything, what an earlier agent left too, and resolves when all is gone. */
  async stopAll(): Promise<void> {
    this.apply([]);
    await this.driver.discardLeftovers();
    await this.stopped();
  }

  /**
   * Stops supervising and leaves every engine running for the next agent to adopt: the
   * agent exits for a restart or an upgrade. Engines being stopped are still waited for.
   */
  async detach(): Promise<void> {
    this.driver.close();
    const shards = [...this.#shards.values()];
    this.#shards.clear();
    await Promise.all(shards.map((s) => s.detach()));
    this.driver.detach();
    await this.stopped();
    for (const log of this.#logs.values()) log.close();
  }

  #log(run: ShardRun): LogBuffer {
    let log = this.#logs.get(run.key);
    if (log === undefined) {
      log = this.driver.log(run);
      this.#logs.set(run.key, log);
    }
    return log;
  }

  #stop(shard: Shard<I>): void {
    if (this.#stopping.has(shard)) return;
    const done = shard.stop().then(() => {
      this.#stopping.delete(shard);
      if (this.#shards.has(shard.key) || [...this.#stopping.keys()].some((s) => s.key === shard.key)) return;
      this.#logs.get(shard.key)?.close();
      this.#logs.delete(shard.key);
      try {
        this.#o.onRemoved?.(shard.key);
      } catch {
        // The listener's failure must not leave the stop unfinished.
      }
    });
    this.#stopping.set(shard, done);
  }
}
