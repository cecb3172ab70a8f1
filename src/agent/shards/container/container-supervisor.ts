import { LogBuffer } from '../log-buffer.js';
import type { GpuProcessReader, ShardRun, ShardRunner, ShardStatus } from '../types.js';
import type { DaemonClient } from './daemon.js';
import { ContainerShard, type ContainerShardContext, type ContainerTiming } from './container-shard.js';
import { listNodeContainers, removeContainer, stopContainer, type ListedContainer } from './operations.js';
import { containerHash } from './requests.js';
import { containerLabels } from './types.js';

export interface ContainerSupervisorOptions {
  /** The daemon: a client, or how to connect (asked again after a failure, so a daemon started later is found). */
  client: DaemonClient | (() => Promise<DaemonClient>);
  /** This node's id: the `llmgw.node` label of its containers, the only ones it adopts or removes. */
  node: string;
  onStatus: (status: ShardStatus) => void;
  /** Called when a stopped shard has left `statuses()` (its container is gone). */
  onRemoved?: (key: string) => void;
  /** This node's llmgw containers that no shard claims are removed after this long (default 300 s). */
  orphanGraceMs?: number;
  /** How often the node's containers are listed for orphans (default 30 s). */
  sweepIntervalMs?: number;
  /** Restart backoff: default 1 s .. 60 s, reset after a run that stayed ready `stableMs` (default 60 s). */
  backoff?: { initialMs: number; maxMs: number };
  stableMs?: number;
  /** After a refusal a person must act on (no NVIDIA runtime, an image that cannot come): default 5 min. */
  refusedRetryMs?: number;
  /** Health checks while starting (default 500 ms). */
  healthIntervalMs?: number;
  /** Health checks once ready (default 5 s); three failures in a row recycle the container. */
  readyHealthIntervalMs?: number;
  /** Default 30 min (models load slowly). */
  readyTimeoutMs?: number;
  /** Ranks without health checks: ready once running this long (default 5 s). */
  settleMs?: number;
  /** Which processes hold memory on each GPU: a GPU container whose processes hold none is degraded. */
  gpuProcesses?: GpuProcessReader;
  /** The first such check after ready (default 10 s), then every (default 30 s). */
  gpuCheckDelayMs?: number;
  gpuCheckIntervalMs?: number;
  /** Lines kept per shard (default 2000). */
  logLines?: number;
  now?: () => number;
}

/** What the survey found of containers an earlier agent of this node left. */
interface Found {
  id: string;
  key: string;
  hash: string;
}

/**
 * The agent's container supervisor: runs each container shard placed on this node as a
 * container of the node's Docker or Podman daemon, as `apply` says, and reports how each
 * one does — the process Supervisor's counterpart, with the same reports.
 *
 * At construction it lists this node's llmgw containers (label `llmgw.node`): a running
 * one whose `llmgw.hash` matches the desired run of its shard is adopted (its logs followed
 * from its last lines, not restarted); one that does not match is removed before its
 * replacement starts; exited ones are removed. Containers of this node that no shard owns
 * (an earlier agent's whose shard is no longer placed here, a crash between create and
 * record) are removed once they have been seen unowned for `orphanGraceMs`.
 */
export class ContainerSupervisor implements ShardRunner {
  readonly #o: ContainerSupervisorOptions;
  readonly #timing: ContainerTiming;
  readonly #shards = new Map<string, ContainerShard>();
  readonly #stopping = new Map<ContainerShard, Promise<void>>();
  readonly #logs = new Map<string, LogBuffer>();
  /** Running containers of an earlier agent, by key, not claimed yet. */
  readonly #adoptable = new Map<string, Found>();
  /** Container ids some shard owns now. */
  readonly #owned = new Set<string>();
  /** Unowned containers, by id: when first seen. */
  readonly #unowned = new Map<string, number>();
  /** Removals in flight (orphans, replaced adoptables). */
  readonly #removing = new Map<string, Promise<void>>();
  readonly #surveyed: Promise<void>;
  #client: Promise<DaemonClient> | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  #sweeping = false;
  #closed = false;

  constructor(options: ContainerSupervisorOptions) {
    this.#o = options;
    this.#timing = {
      backoff: options.backoff ?? { initialMs: 1000, maxMs: 60_000 },
      startingIntervalMs: options.healthIntervalMs ?? 500,
      readyIntervalMs: options.readyHealthIntervalMs ?? 5000,
      readyTimeoutMs: options.readyTimeoutMs ?? 30 * 60_000,
      settleMs: options.settleMs ?? 5000,
      stableMs: options.stableMs ?? 60_000,
      refusedRetryMs: options.refusedRetryMs ?? 5 * 60_000,
      gpuCheckDelayMs: options.gpuCheckDelayMs ?? 10_000,
      gpuCheckIntervalMs: options.gpuCheckIntervalMs ?? 30_000,
    };
    this.#surveyed = this.#survey();
    this.#sweeper = setInterval(() => {
      void this.sweep();
    }, options.sweepIntervalMs ?? 30_000);
    this.#sweeper.unref();
  }

  /** Resolves once the node's containers have been listed (adoption decided); never rejects. */
  surveyed(): Promise<void> {
    return this.#surveyed;
  }

  apply(desired: readonly ShardRun[]): void {
    const wanted = new Map<string, ShardRun>();
    for (const run of desired) {
      if (run.container === undefined)
        throw new Error(`shard ${run.key} is not a container run: the process supervisor runs it`);
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
      const hash = containerHash(run);
      const current = this.#shards.get(run.key);
      if (current?.hash === hash) {
        current.update(run);
        continue;
      }
      if (current !== undefined) this.#stop(current);
      const previous = [...this.#stopping].filter(([s]) => s.key === run.key).map(([, done]) => done);
      const shard = new ContainerShard(run, hash, this.#context(run));
      this.#shards.set(run.key, shard);
      shard.start(previous.length === 0 ? undefined : Promise.all(previous).then(() => undefined));
    }
  }

  statuses(): ShardStatus[] {
    const out = [...this.#shards.values()].map((s) => s.status());
    for (const shard of this.#stopping.keys()) if (!this.#shards.has(shard.key)) out.push(shard.status());
    return out;
  }

  logs(key: string, tail?: number): string[] {
    return this.#logs.get(key)?.tail(tail) ?? [];
  }

  follow(key: string, listener: (line: string) => void): () => void {
    return this.#logs.get(key)?.follow(listener) ?? (() => undefined);
  }

  async stopped(): Promise<void> {
    while (this.#stopping.size > 0 || this.#removing.size > 0)
      await Promise.all([...this.#stopping.values(), ...this.#removing.values()]);
  }

  /** Stops and removes every container, the unclaimed ones of an earlier agent too. */
  async stopAll(): Promise<void> {
    this.apply([]);
    await this.#surveyed;
    for (const found of this.#adoptable.values()) this.#remove(found.id, 10);
    this.#adoptable.clear();
    this.#close();
    await this.stopped();
  }

  /** Leaves every container running for the next agent to adopt by its labels. */
  async detach(): Promise<void> {
    this.#close();
    const shards = [...this.#shards.values()];
    this.#shards.clear();
    await Promise.all(shards.map((s) => s.detach()));
    this.#adoptable.clear();
    await this.stopped();
    for (const log of this.#logs.values()) log.close();
  }

  /**
   * Lists this node's containers and removes those no shard owns that have been seen
   * unowned for the grace; the timer calls it, tests may too.
   */
  async sweep(): Promise<void> {
    if (this.#sweeping || this.#closed) return;
    this.#sweeping = true;
    try {
      await this.#surveyed;
      const client = await this.#connect();
      const now = this.#now();
      const grace = this.#o.orphanGraceMs ?? 300_000;
      const listed = await listNodeContainers(client, this.#o.node);
      const seen = new Set<string>();
      for (const c of listed) {
        if (this.#owned.has(c.id) || this.#removing.has(c.id)) continue;
        seen.add(c.id);
        const since = this.#unowned.get(c.id) ?? now;
        this.#unowned.set(c.id, since);
        if (now - since < grace) continue;
        const key = c.labels[containerLabels.shard];
        if (key !== undefined && this.#adoptable.get(key)?.id === c.id) this.#adoptable.delete(key);
        this.#remove(c.id, 10);
      }
      for (const id of this.#unowned.keys()) if (!seen.has(id)) this.#unowned.delete(id);
    } catch {
      // The daemon is away: the next sweep looks again.
    } finally {
      this.#sweeping = false;
    }
  }

  #close(): void {
    this.#closed = true;
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }

  #connect(): Promise<DaemonClient> {
    const client = this.#o.client;
    if (typeof client !== 'function') return Promise.resolve(client);
    if (this.#client === undefined) {
      const p = client();
      this.#client = p;
      p.catch(() => {
        if (this.#client === p) this.#client = undefined;
      });
    }
    return this.#client;
  }

  async #survey(): Promise<void> {
    let listed: ListedContainer[];
    try {
      listed = await listNodeContainers(await this.#connect(), this.#o.node);
    } catch {
      // No daemon yet: nothing to adopt; the sweep finds what there is later.
      return;
    }
    const now = this.#now();
    for (const c of listed) {
      const key = c.labels[containerLabels.shard];
      const hash = c.labels[containerLabels.hash];
      if (!c.running || key === undefined || hash === undefined || this.#adoptable.has(key)) {
        // Exited (its shard's restart is the agent's to make), or not ours to understand.
        this.#remove(c.id, 10);
        continue;
      }
      this.#adoptable.set(key, { id: c.id, key, hash });
      this.#unowned.set(c.id, now);
    }
  }

  async #claim(key: string, hash: string): Promise<string | undefined> {
    await this.#surveyed;
    const found = this.#adoptable.get(key);
    if (found === undefined) return undefined;
    this.#adoptable.delete(key);
    if (found.hash === hash && !this.#removing.has(found.id)) {
      this.#owned.add(found.id);
      this.#unowned.delete(found.id);
      return found.id;
    }
    // Runs something else: gone before its replacement takes the port and the GPUs.
    this.#remove(found.id, 10);
    await this.#removing.get(found.id);
    return undefined;
  }

  #remove(id: string, graceS: number): void {
    if (this.#removing.has(id)) return;
    const done = (async () => {
      try {
        const client = await this.#connect();
        await stopContainer(client, id, graceS).catch(() => undefined);
        await removeContainer(client, id);
      } catch {
        // The next sweep finds it again.
      }
    })().finally(() => {
      this.#removing.delete(id);
      this.#unowned.delete(id);
    });
    this.#removing.set(id, done);
  }

  #stop(shard: ContainerShard): void {
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

  #context(run: ShardRun): ContainerShardContext {
    let log = this.#logs.get(run.key);
    if (log === undefined) {
      // In memory only: the lines come from the daemon's log stream, not from a file the engine writes.
      log = new LogBuffer({ lines: this.#o.logLines ?? 2000, maxFileBytes: Number.MAX_SAFE_INTEGER });
      this.#logs.set(run.key, log);
    }
    return {
      client: () => this.#connect(),
      node: this.#o.node,
      log,
      timing: this.#timing,
      onStatus: this.#o.onStatus,
      claim: (key, hash) => this.#claim(key, hash),
      own: (id) => {
        this.#owned.add(id);
        this.#unowned.delete(id);
      },
      disown: (id) => {
        this.#owned.delete(id);
      },
      gpuProcesses: this.#o.gpuProcesses,
      now: () => this.#now(),
    };
  }
}
