import type { DeviceList, NodeState, Pool, PoolRule, Slot } from './node-state.js';
import { RankHeap } from './rank-heap.js';

/** How a pool is made: its rule, and which nodes belong (with their devices of its class). */
export type PoolMaker = (key: string) => {
  rule: PoolRule;
  /** Undefined: not a member. Else the node's devices of the pool's class (none for CPUs). */
  member: (state: NodeState) => { list: DeviceList | undefined } | undefined;
};

/**
 * Candidate nodes for new shards, per pool (a device class and kind, or CPUs), kept in
 * buckets so the next node is found without scanning the cluster:
 * level (replicas of the model being placed on the node: spread first), then free amount
 * (best fit), then name order (each bucket is a heap by rank).
 *
 * Models are placed one at a time. While none is, every node sits at level 0. When a model
 * begins, only the nodes that host it (no more than its replicas) move to higher levels, and
 * move back when it ends; so the cost grows with shards, not with models × nodes.
 */
export class Candidates {
  readonly #pools = new Map<string, Pool>();
  readonly #states: readonly NodeState[];
  readonly #make: PoolMaker;
  #hosts: ReadonlyMap<number, number> | undefined;
  #levelled: Pool[] = [];

  constructor(states: readonly NodeState[], make: PoolMaker) {
    this.#states = states;
    this.#make = make;
  }

  /** Starts placing a model: `hosts` maps node rank to its replicas of it, and is read live. */
  begin(hosts: ReadonlyMap<number, number>): void {
    this.#hosts = hosts;
  }

  end(): void {
    const hosts = this.#hosts;
    this.#hosts = undefined;
    for (const pool of this.#levelled) {
      pool.levelled = false;
      if (hosts !== undefined) for (const rank of hosts.keys()) this.#reseatRank(pool, rank);
    }
    this.#levelled = [];
  }

  /**
   * The best open node of a pool with at least `min` free that `accept` takes: fewest replicas
   * of the current model, then least free, then name. It stays in place: take it with
   * `detach` or change its state and `reseat` it.
   */
  best(key: string, min: number, accept: (state: NodeState) => boolean): Slot | undefined {
    const pool = this.#pool(key);
    const levels = pool.levels;
    for (let level = 0; level < levels.length; level++) {
      if (pool.sizes[level] === 0) continue;
      const row = levels[level] ?? [];
      for (let b = Math.max(0, min); b < row.length; b++) {
        const heap = row[b];
        if (heap === undefined || heap.size === 0) continue;
        const found = firstAccepted(heap, accept);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  }

  /** Takes a slot out of its pool until the next reseat (while a multi-node set is chosen). */
  detach(slot: Slot): void {
    this.#unseat(slot.pool, slot);
  }

  /** Puts a node's slots where its state now says: call after every change to it. */
  reseat(state: NodeState): void {
    for (const slot of state.slots) this.#seat(slot.pool, slot);
  }

  #pool(key: string): Pool {
    let pool = this.#pools.get(key);
    if (pool === undefined) {
      const { rule, member } = this.#make(key);
      const made: Pool = { rule, slots: new Map(), levels: [[]], sizes: [0], levelled: false };
      pool = made;
      this.#pools.set(key, made);
      for (const state of this.#states) {
        const m = member(state);
        if (m === undefined) continue;
        const slot: Slot = {
          rank: state.rank,
          node: state,
          pool: made,
          list: m.list,
          heap: undefined,
          index: -1,
          level: 0,
          bucket: 0,
        };
        pool.slots.set(state.rank, slot);
        state.slots.push(slot);
      }
      if (this.#hosts !== undefined) {
        pool.levelled = true;
        this.#levelled.push(pool);
      }
      for (const slot of pool.slots.values()) this.#seat(pool, slot);
    } else if (this.#hosts !== undefined && !pool.levelled) {
      pool.levelled = true;
      this.#levelled.push(pool);
      for (const rank of this.#hosts.keys()) this.#reseatRank(pool, rank);
    }
    return pool;
  }

  #reseatRank(pool: Pool, rank: number): void {
    const slot = pool.slots.get(rank);
    if (slot !== undefined) this.#seat(pool, slot);
  }

  #seat(pool: Pool, slot: Slot): void {
    this.#unseat(pool, slot);
    const state = slot.node;
    if (!pool.rule.open(slot)) return;
    const level = pool.levelled ? (this.#hosts?.get(state.rank) ?? 0) : 0;
    const bucket = Math.max(0, pool.rule.measure(slot));
    while (pool.levels.length <= level) {
      pool.levels.push([]);
      pool.sizes.push(0);
    }
    const row = pool.levels[level] ?? [];
    let heap = row[bucket];
    if (heap === undefined) {
      heap = new RankHeap<Slot>();
      row[bucket] = heap;
    }
    heap.push(slot);
    slot.level = level;
    slot.bucket = bucket;
    pool.sizes[level] = (pool.sizes[level] ?? 0) + 1;
  }

  #unseat(pool: Pool, slot: Slot): void {
    if (slot.heap === undefined) return;
    pool.levels[slot.level]?.[slot.bucket]?.remove(slot);
    pool.sizes[slot.level] = (pool.sizes[slot.level] ?? 1) - 1;
  }
}

/** The lowest-ranked slot of a heap that `accept` takes; those passed over go back. */
function firstAccepted(heap: RankHeap<Slot>, accept: (state: NodeState) => boolean): Slot | undefined {
  let top = heap.peek();
  if (top === undefined || accept(top.node)) return top;
  const passed: Slot[] = [];
  while (top !== undefined && !accept(top.node)) {
    heap.remove(top);
    passed.push(top);
    top = heap.peek();
  }
  for (const slot of passed) heap.push(slot);
  return top;
}
