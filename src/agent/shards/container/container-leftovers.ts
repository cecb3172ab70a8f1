import type { DaemonClient } from './daemon.js';
import { listNodeContainers, removeContainer, stopContainer, type ListedContainer } from './operations.js';
import { containerLabels } from './types.js';

export interface ContainerLeftoversOptions {
  connect: () => Promise<DaemonClient>;
  /** This node's id: the `llmgw.node` label of its containers, the only ones adopted or removed. */
  node: string;
  /** This node's llmgw containers that no shard claims are removed after this long. */
  orphanGraceMs: number;
  /** How often the node's containers are listed for orphans. */
  sweepIntervalMs: number;
  now: () => number;
}

/** What the survey found of containers an earlier agent of this node left. */
interface Found {
  id: string;
  key: string;
  hash: string;
}

/**
 * This node's llmgw containers that are not a shard's now: at construction it lists them
 * (label `llmgw.node`): a running one with its shard's labels waits to be claimed by a
 * shard of the same hash; exited ones are removed. Containers of this node that no shard
 * owns (an earlier agent's whose shard is no longer placed here, a crash between create and
 * record) are removed once they have been seen unowned for the grace.
 */
export class ContainerLeftovers {
  readonly #o: ContainerLeftoversOptions;
  /** Running containers of an earlier agent, by key, not claimed yet. */
  readonly #adoptable = new Map<string, Found>();
  /** Container ids some shard owns now. */
  readonly #owned = new Set<string>();
  /** Unowned containers, by id: when first seen. */
  readonly #unowned = new Map<string, number>();
  /** Removals in flight (orphans, replaced adoptables). */
  readonly #removing = new Map<string, Promise<void>>();
  readonly #surveyed: Promise<void>;
  #sweeper: NodeJS.Timeout | undefined;
  #sweeping = false;
  #closed = false;

  constructor(options: ContainerLeftoversOptions) {
    this.#o = options;
    this.#surveyed = this.#survey();
    this.#sweeper = setInterval(() => {
      void this.sweep();
    }, options.sweepIntervalMs);
    this.#sweeper.unref();
  }

  /** Resolves once the node's containers have been listed (adoption decided); never rejects. */
  surveyed(): Promise<void> {
    return this.#surveyed;
  }

  unclaimed(): string[] {
    return [...this.#adoptable.keys()];
  }

  own(id: string): void {
    this.#owned.add(id);
    this.#unowned.delete(id);
  }

  disown(id: string): void {
    this.#owned.delete(id);
  }

  /**
   * An earlier agent's running container of this key: its id when it runs this very run
   * (same hash), to take over; any other is removed first.
   */
  async claim(key: string, hash: string): Promise<string | undefined> {
    await this.#surveyed;
    const found = this.#adoptable.get(key);
    if (found === undefined) return undefined;
    this.#adoptable.delete(key);
    if (found.hash === hash && !this.#removing.has(found.id)) {
      this.own(found.id);
      return found.id;
    }
    // Runs something else: gone before its replacement takes the port and the GPUs.
    this.#remove(found.id, 10);
    await this.#removing.get(found.id);
    return undefined;
  }

  /** Removes the unclaimed ones of an earlier agent whose key `keep` does not want. */
  release(keep: (key: string) => boolean): string[] {
    const out: string[] = [];
    for (const [key, found] of this.#adoptable) {
      if (keep(key)) continue;
      this.#adoptable.delete(key);
      this.#remove(found.id, 10);
      out.push(key);
    }
    return out;
  }

  /** Removes every unclaimed one, once the survey is done, and stops sweeping. */
  async discard(): Promise<void> {
    await this.#surveyed;
    this.release(() => false);
    this.close();
  }

  pending(): Promise<void>[] {
    return [...this.#removing.values()];
  }

  close(): void {
    this.#closed = true;
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  /** Leaves the unclaimed ones running for the next agent. */
  detach(): void {
    this.#adoptable.clear();
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
      const client = await this.#o.connect();
      const now = this.#o.now();
      const listed = await listNodeContainers(client, this.#o.node);
      const seen = new Set<string>();
      for (const c of listed) {
        if (this.#owned.has(c.id) || this.#removing.has(c.id)) continue;
        seen.add(c.id);
        const since = this.#unowned.get(c.id) ?? now;
        this.#unowned.set(c.id, since);
        if (now - since < this.#o.orphanGraceMs) continue;
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

  async #survey(): Promise<void> {
    let listed: ListedContainer[];
    try {
      listed = await listNodeContainers(await this.#o.connect(), this.#o.node);
    } catch {
      // No daemon yet: nothing to adopt; the sweep finds what there is later.
      return;
    }
    const now = this.#o.now();
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

  #remove(id: string, graceS: number): void {
    if (this.#removing.has(id)) return;
    const done = (async () => {
      try {
        const client = await this.#o.connect();
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
}
