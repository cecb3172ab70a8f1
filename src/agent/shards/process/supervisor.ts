import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { engineEnv } from './engine-env.js';
import { killOrphans, ProcessRecord, survey, type FoundShard, type Survey } from './leftovers.js';
import { LogBuffer } from '../log-buffer.js';
import { ProcessGroup } from './process-group.js';
import { groupMembers, listProcesses, processTree } from './process-tree.js';
import { runHash } from '../run-hash.js';
import { Shard, type ShardContext } from './shard.js';
import { readListeners, socketInodes } from './sockets.js';
import type { GpuProcessReader, ShardRun, ShardStatus, ShardTiming } from '../types.js';

export interface SupervisorOptions {
  /** Each shard's log file goes here: `${logDir}/${replica}-r${rank}.log` (appended, rotated at ~10 MiB keeping one .1). */
  logDir: string;
  /** Called on every change of a shard's status: state, reason, pid, restarts, exits. */
  onStatus: (status: ShardStatus) => void;
  /**
   * Called when a stopped shard has left `statuses()` (its processes are gone), so the
   * agent can report the set again. No onStatus comes for the removal itself.
   */
  onRemoved?: (key: string) => void;
  /** Which pids hold memory on which GPU uuid; used for the GPU memory check. Optional. */
  gpuProcesses?: GpuProcessReader;
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
  /** While another program holds a shard's port: how often to look again (default 2 s). */
  portRetryMs?: number;
  /** Ring buffer size per shard, default 2000 lines. */
  logLines?: number;
  /** The log file is rotated past this size (default 10 MiB). */
  logFileMaxBytes?: number;
  /**
   * Where the processes are recorded, for the next agent to adopt them; default
   * `${logDir}/../processes.json`. Read at construction: see `adoption`.
   */
  stateFile?: string;
  /**
   * Base environment of engines (default: what engineEnv keeps of process.env, never the
   * agent's own secrets); ProcessSpec.env is added on top.
   */
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}

/**
 * The agent's process supervisor: keeps the engines of the shards placed on this node
 * running, as `apply` says, and reports how each one is doing.
 *
 * A stopped shard's status reads 'stopping' until its processes are gone; then it leaves
 * `statuses()` and `onRemoved` is called. A key that is stopping and desired again (or
 * whose run changed) starts its new processes only once the old ones have exited, since
 * they hold the same port and GPU memory.
 */
export class Supervisor {
  readonly #o: SupervisorOptions;
  readonly #timing: ShardTiming;
  readonly #record: ProcessRecord;
  /** The desired shards, by key. */
  readonly #shards = new Map<string, Shard>();
  /** Shards stopping (no longer desired, or replaced), until their processes are gone. */
  readonly #stopping = new Map<Shard, Promise<void>>();
  /** Per key, kept across restarts and replacements, dropped once the key is gone. */
  readonly #logs = new Map<string, LogBuffer>();
  /** Engines an earlier agent started, running as recorded, not yet claimed by a desired shard of the same run. */
  readonly #adoptable = new Map<string, Unclaimed>();
  /** An earlier agent's engines being stopped (not adoptable, unassigned or changed), by key, until gone. */
  readonly #stoppingAdopted = new Map<string, { groups: ProcessGroup[]; done: Promise<void> }>();
  /** Keys whose shard took over an earlier agent's engines. */
  readonly #adoptedKeys = new Set<string>();
  /** What was found of the earlier agent's engines at construction, for the agent's log. */
  readonly adoption: Survey;

  constructor(options: SupervisorOptions) {
    this.#o = options;
    this.#timing = {
      backoff: options.backoff ?? { initialMs: 1000, maxMs: 60_000 },
      startingIntervalMs: options.healthIntervalMs ?? 500,
      readyIntervalMs: options.readyHealthIntervalMs ?? 5000,
      readyTimeoutMs: options.readyTimeoutMs ?? 30 * 60_000,
      settleMs: options.settleMs ?? 5000,
      gpuCheckDelayMs: options.gpuCheckDelayMs ?? 10_000,
      gpuCheckIntervalMs: options.gpuCheckIntervalMs ?? 30_000,
      stableMs: options.stableMs ?? 60_000,
      portRetryMs: options.portRetryMs ?? 2000,
    };
    mkdirSync(options.logDir, { recursive: true });
    const stateFile = options.stateFile ?? join(options.logDir, '..', 'processes.json');
    // What an earlier agent of this node left running: taken over when desired again, else stopped.
    this.adoption = survey(stateFile);
    const found = [...this.adoption.adoptable, ...this.adoption.stale];
    this.#record = new ProcessRecord(
      stateFile,
      found.flatMap((f) => f.processes),
    );
    for (const o of this.adoption.orphans) killOrphans(o.pids);
    for (const f of this.adoption.adoptable) this.#adoptable.set(f.key, unclaimed(f));
    for (const f of this.adoption.stale) this.#stopAdopted(unclaimed(f));
  }

  /** Keys of engines an earlier agent started that wait to be claimed by a desired shard (or released). */
  unclaimed(): string[] {
    return [...this.#adoptable.keys()];
  }

  /**
   * Stops the earlier agent's engines not claimed yet whose key `keep` does not want: the
   * control plane's first assignment does not place them here, or none came in time.
   * Returns the keys stopped.
   */
  releaseUnclaimed(keep: (key: string) => boolean = () => false): string[] {
    const out: string[] = [];
    for (const [key, u] of this.#adoptable) {
      if (keep(key)) continue;
      this.#adoptable.delete(key);
      this.#stopAdopted(u);
      out.push(key);
    }
    return out;
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
   * wanted, restarts a key whose processes, health, GPUs or degraded reason changed, and
   * leaves the others alone. Never waits for stops: `stopped()` does.
   */
  apply(desired: readonly ShardRun[]): void {
    const wanted = new Map<string, ShardRun>();
    for (const run of desired) {
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
      const hash = runHash(run);
      const current = this.#shards.get(run.key);
      if (current?.hash === hash) {
        current.update(run);
        continue;
      }
      if (current !== undefined) this.#stop(current);
      // An earlier agent's engine for this key: taken over when it runs this very run, else replaced.
      const found = this.#adoptable.get(run.key);
      this.#adoptable.delete(run.key);
      let adopted: { groups: ProcessGroup[]; run: string } | undefined;
      if (found?.hash === hash) adopted = { groups: found.groups, run: found.run };
      else if (found !== undefined) this.#stopAdopted(found);
      const previous = [...this.#stopping].filter(([s]) => s.key === run.key).map(([, done]) => done);
      const old = this.#stoppingAdopted.get(run.key);
      if (old !== undefined) previous.push(old.done);
      const context = this.#context(run);
      if (adopted !== undefined) {
        // Its recent output, for `logs` at once.
        context.log.loadRecent();
        this.#adoptedKeys.add(run.key);
      }
      const shard = new Shard(run, hash, context);
      this.#shards.set(run.key, shard);
      shard.start(previous.length === 0 ? undefined : Promise.all(previous).then(() => undefined), adopted);
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

  /**
   * Ports in `first..last` that a program other than these engines listens on (those of
   * engines that are stopping are theirs still); undefined where this machine cannot tell.
   */
  portsTaken(first: number, last: number): number[] | undefined {
    const listeners = readListeners();
    if (listeners === undefined) return undefined;
    const inRange = listeners.filter((l) => l.port >= first && l.port <= last);
    if (inRange.length === 0) return [];
    const ours = socketInodes(this.#ownPids());
    return [...new Set(inRange.filter((l) => !ours.has(l.inode)).map((l) => l.port))].sort((a, b) => a - b);
  }

  /** Resolves when every shard that is stopping has exited. */
  async stopped(): Promise<void> {
    while (this.#stopping.size > 0 || this.#stoppingAdopted.size > 0)
      await Promise.all([
        ...this.#stopping.values(),
        ...[...this.#stoppingAdopted.values()].map((s) => s.done),
      ]);
  }

  /** Stops everything (SIGTERM, then SIGKILL after each shard's stopGraceMs) and resolves when all have exited. */
  stopAll(): Promise<void> {
    this.apply([]);
    this.releaseUnclaimed();
    return this.stopped();
  }

  /**
   * Stops supervising and leaves every engine running, recorded, for the next agent to
   * adopt: the agent exits for a restart or an upgrade. Engines being stopped are still
   * waited for.
   */
  async detach(): Promise<void> {
    const shards = [...this.#shards.values()];
    this.#shards.clear();
    await Promise.all(shards.map((s) => s.detach()));
    for (const u of this.#adoptable.values()) for (const g of u.groups) g.release();
    this.#adoptable.clear();
    await this.stopped();
    for (const log of this.#logs.values()) log.close();
  }

  #stop(shard: Shard): void {
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

  /** Stops an earlier agent's engine (SIGTERM to its groups, SIGKILL after its grace), and drops its record once gone. */
  #stopAdopted(u: Unclaimed): void {
    if (this.#stoppingAdopted.has(u.key)) return;
    const done = Promise.all(u.groups.map((g) => g.terminate(u.stopGraceMs))).then(() => {
      this.#stoppingAdopted.delete(u.key);
      // A shard of this key started meanwhile records its own processes once these are gone.
      if (!this.#shards.has(u.key)) this.#record.set(u.key, []);
    });
    this.#stoppingAdopted.set(u.key, { groups: u.groups, done });
  }

  #context(run: ShardRun): ShardContext {
    let log = this.#logs.get(run.key);
    if (log === undefined) {
      log = new LogBuffer({
        lines: this.#o.logLines ?? 2000,
        file: join(this.#o.logDir, logFileName(run)),
        maxFileBytes: this.#o.logFileMaxBytes ?? 10 * 1024 * 1024,
      });
      log.watch();
      this.#logs.set(run.key, log);
    }
    return {
      log,
      record: this.#record,
      env: this.#o.env ?? engineEnv(process.env),
      timing: this.#timing,
      onStatus: this.#o.onStatus,
      gpuProcesses: this.#o.gpuProcesses,
      ownPids: () => this.#ownPids(),
      now: this.#o.now ?? Date.now,
    };
  }

  #ownPids(): Set<number> {
    const processes = listProcesses();
    const out = new Set<number>();
    for (const shard of new Set([...this.#shards.values(), ...this.#stopping.keys()]))
      for (const pid of shard.pids(processes)) out.add(pid);
    // The earlier agent's engines hold their ports too: they are this node's, not another program's.
    const earlier = [...this.#adoptable.values(), ...this.#stoppingAdopted.values()].flatMap((u) => u.groups);
    for (const g of earlier)
      for (const pid of [...processTree(g.pid, processes), ...groupMembers(g.pid, processes)]) out.add(pid);
    return out;
  }
}

/** An earlier agent's engine, taken over for watching until claimed or stopped. */
interface Unclaimed {
  key: string;
  hash: string | undefined;
  run: string;
  stopGraceMs: number;
  groups: ProcessGroup[];
}

function unclaimed(f: FoundShard): Unclaimed {
  const first = f.processes[0];
  return {
    key: f.key,
    hash: first?.hash,
    run: first?.run ?? '',
    stopGraceMs: first?.stopGraceMs ?? 10_000,
    groups: f.processes.map((p) =>
      ProcessGroup.adopt({ name: p.name, pid: p.pid, startTime: p.startTime ?? 0, run: p.run }),
    ),
  };
}

/** `${replica}-r${rank}.log`, with anything a file name should not hold replaced. */
export function logFileName(run: Pick<ShardRun, 'replica' | 'rank'>): string {
  return `${run.replica.replace(/[^A-Za-z0-9._-]/g, '_')}-r${run.rank}.log`;
}
