import type { Breaker } from './breaker.js';
import type { PrefixIndex } from './prefix-index.js';
import type { AcquireOptions, Lease, LoadReading, Outcome, RouteReplica } from './types.js';

/** The router's own records: a model's replicas and queue, and the leases it hands out. */

/** What a pick is told of the request. */
export type Wants = Omit<AcquireOptions, 'signal' | 'exclude'> | undefined;

/**
 * A stale or missing reading counts as this much load: such a replica is taken only when
 * no replica with a fresh reading is free (stale metrics count as saturated, as in llm-d's
 * saturation detector), and among stale ones the gateway's own count decides.
 */
export const STALE_PENALTY = 1_000_000;

/** One replica as the router keeps it: its load, breaker and prefix blocks. */
export class ReplicaEntry {
  replica: RouteReplica;
  capacity: number;
  readonly group: ModelGroup;
  readonly breaker: Breaker;
  /** The gateway's own requests on it now. */
  inFlight = 0;
  /** Requests other workers of this gateway have on it now (setPeerInFlight); 0 with one worker. */
  peerInFlight = 0;
  reading: LoadReading | undefined = undefined;
  /** The reading's load: running + waiting + KV use × weight. */
  base = 0;
  /** The gateway's requests in flight (own and peers') when the reading came: the reading already counts them. */
  inFlightAtReading = 0;
  scrapeError: string | undefined = undefined;
  removed = false;
  /** The prompt blocks sent here: what its prefix cache likely holds. */
  readonly prefix: PrefixIndex;

  constructor(replica: RouteReplica, group: ModelGroup, breaker: Breaker, prefix: PrefixIndex) {
    this.replica = replica;
    this.capacity = Math.max(1, replica.capacity);
    this.group = group;
    this.breaker = breaker;
    this.prefix = prefix;
  }
}

/** A request waiting in its model's queue. */
export interface Waiter {
  readonly group: ModelGroup;
  readonly wants: Wants;
  readonly exclude: ReadonlySet<string> | undefined;
  readonly signal: AbortSignal | undefined;
  readonly enqueuedAt: number;
  readonly resolve: (lease: Lease) => void;
  readonly reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
  prev: Waiter | undefined;
  next: Waiter | undefined;
}

/** One model: its replicas in an array (scanned per request) and its FIFO of waiters. */
export class ModelGroup {
  readonly model: string;
  entries: ReplicaEntry[] = [];
  inFlight = 0;
  head: Waiter | undefined = undefined;
  tail: Waiter | undefined = undefined;
  queued = 0;
  /** Wakes the queue when the earliest breaker cooldown ends. */
  wake: NodeJS.Timeout | undefined = undefined;
  wakeAt = 0;
  /** The round-robin policy's next replica. */
  cursor = 0;

  constructor(model: string) {
    this.model = model;
  }

  push(waiter: Waiter): void {
    waiter.prev = this.tail;
    if (this.tail) this.tail.next = waiter;
    else this.head = waiter;
    this.tail = waiter;
    this.queued++;
  }

  unlink(waiter: Waiter): void {
    if (waiter.prev) waiter.prev.next = waiter.next;
    else this.head = waiter.next;
    if (waiter.next) waiter.next.prev = waiter.prev;
    else this.tail = waiter.prev;
    waiter.prev = undefined;
    waiter.next = undefined;
    this.queued--;
  }
}

/** How a lease hands its replica back: `key` is the key whose request it was. */
export type ReleaseFn = (
  entry: ReplicaEntry,
  trial: boolean,
  outcome: Outcome,
  key: string | undefined,
) => void;

export class RouterLease implements Lease {
  readonly replica: RouteReplica;
  readonly queuedMs: number;
  readonly #entry: ReplicaEntry;
  readonly #trial: boolean;
  readonly #done: ReleaseFn;
  #released = false;

  constructor(entry: ReplicaEntry, queuedMs: number, trial: boolean, done: ReleaseFn) {
    this.replica = entry.replica;
    this.queuedMs = queuedMs;
    this.#entry = entry;
    this.#trial = trial;
    this.#done = done;
  }

  release(outcome: Outcome, key?: string): void {
    if (this.#released) return;
    this.#released = true;
    this.#done(this.#entry, this.#trial, outcome, key);
  }
}

/** A replica's load now: its reading's, plus the gateway's requests sent since. */
export function scoreOf(entry: ReplicaEntry, now: number, staleMs: number): number {
  const reading = entry.reading;
  if (reading === undefined || now - reading.at > staleMs)
    return STALE_PENALTY + entry.inFlight + entry.peerInFlight;
  // Only the requests added since the reading: it already counts those in flight then.
  const added = entry.inFlight + entry.peerInFlight - entry.inFlightAtReading;
  return added > 0 ? entry.base + added : entry.base;
}

/** Full: the requests of every worker of the gateway on it reach its capacity. */
export function isFull(entry: ReplicaEntry): boolean {
  return entry.inFlight + entry.peerInFlight >= entry.capacity;
}

export function isExcluded(entry: ReplicaEntry, exclude: ReadonlySet<string> | undefined): boolean {
  return exclude !== undefined && exclude.size > 0 && exclude.has(entry.replica.id);
}
