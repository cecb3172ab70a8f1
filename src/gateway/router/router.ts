import { AffinityMap } from './affinity-map.js';
import { Breaker, type BreakerEvidence, type BreakerSnapshot } from './breaker.js';
import { PrefixIndex } from './prefix-index.js';
import { allExcluded, cancelled, failingTimeout, queueFull, queueTimeout } from './refusals.js';
import { RestartingModels } from './restarting-models.js';
import type {
  AcquireOptions,
  Lease,
  LoadReading,
  Outcome,
  PickHook,
  ReplicaLoad,
  Restarting,
  RouteReplica,
  RoutingPolicy,
  ScrapeFailureKind,
} from './types.js';
import {
  isExcluded,
  isFull,
  ModelGroup,
  ReplicaEntry,
  RouterLease,
  scoreOf,
  STALE_PENALTY,
  type ReleaseFn,
  type Waiter,
  type Wants,
} from './model-group.js';

export interface RouterOptions {
  /** A reading older than this is stale: the replica counts as busy (default 1000 ms = 4 missed scrapes). */
  staleMs?: number;
  /** A conversation stays on its replica while that one's score is within this of the least loaded (default 2 requests). */
  affinityBound?: number;
  /** How long a conversation's replica is remembered after its last request (default 10 min). */
  affinityTtlMs?: number;
  /** Conversations remembered at most, least recently used dropped first (default 100 000). */
  affinityMaxEntries?: number;
  /** Requests waiting per model for a free replica, and for how long (default 256 and 30 s). */
  queue?: { maxPerModel: number; timeoutMs: number };
  /** Breaker cooldowns (default 1 s doubling to 30 s). */
  breaker?: { initialMs?: number; maxMs?: number };
  /** The clock of readings and cooldowns, ms. */
  now?: () => number;
  /** Breaks ties between equally loaded replicas. */
  random?: () => number;
  /** How replicas are picked (default `ours`); see RoutingPolicy. */
  policy?: RoutingPolicy;
  /**
   * A request goes to the replica holding the longest part of its prompt's start while
   * that one's score is within this × the fraction of the prompt it holds of the least
   * loaded (default 8 requests, as AIBrix's prefix-cache policy guards at 8 running).
   */
  prefixBound?: number;
  /** Prompt blocks remembered per replica (default 16,384, ~0.7 MB; llm-d: 31,250). */
  prefixMaxBlocks?: number;
  /** Overrides the policy's pick (a measuring oracle); the gateway does everything else. */
  pick?: PickHook;
}

/** The evidence a release or a scrape gives, made once. */
const succeeded: BreakerEvidence = { kind: 'succeeded', trial: false };
const trialSucceeded: BreakerEvidence = { kind: 'succeeded', trial: true };
const failed: BreakerEvidence = { kind: 'failed', needsRequest: false };
const hung: BreakerEvidence = { kind: 'failed', needsRequest: true };
const answered: BreakerEvidence = { kind: 'answered' };

/** A full KV cache weighs as much as four queued requests: it is where preemption starts. */
const KV_WEIGHT = 4;
/** Retry-After for a busy model: completions free slots within seconds. */
const BUSY_RETRY_AFTER_S = 5;

/**
 * Picks, for each request, the least loaded ready replica of its model: the engine's own
 * running and waiting requests (and KV use) from its last reading, plus the gateway's
 * requests sent since. Full replicas (the gateway's requests ≥ capacity) and open breakers
 * are skipped; when nothing is left the request waits in its model's FIFO queue.
 */
export class Router {
  readonly #staleMs: number;
  readonly #affinityBound: number;
  readonly #maxQueued: number;
  readonly #queueTimeoutMs: number;
  readonly #breakerOptions: { initialMs?: number; maxMs?: number };
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #affinity: AffinityMap;
  readonly #policy: RoutingPolicy;
  readonly #prefixBound: number;
  readonly #prefixMaxBlocks: number;
  readonly #hook: PickHook | undefined;
  readonly #entries = new Map<string, ReplicaEntry>();
  readonly #groups = new Map<string, ModelGroup>();
  /** Models with no replica in the table that come back by themselves. */
  readonly #restarting: RestartingModels;
  readonly #release: ReleaseFn = (entry, trial, outcome, key) => {
    this.#released(entry, trial, outcome, key);
  };
  /** Told of evidence that changed a replica's breaker here (a gateway worker sends it to its primary). */
  #onEvidence: ((replica: string, e: BreakerEvidence) => void) | undefined;
  /** Told when this router's own in-flight counts change (a gateway worker posts them to its peers). */
  #onInFlight: (() => void) | undefined;

  constructor(options: RouterOptions = {}) {
    this.#staleMs = options.staleMs ?? 1000;
    this.#affinityBound = options.affinityBound ?? 2;
    this.#maxQueued = options.queue?.maxPerModel ?? 256;
    this.#queueTimeoutMs = options.queue?.timeoutMs ?? 30_000;
    this.#restarting = new RestartingModels(this.#queueTimeoutMs);
    this.#breakerOptions = { ...options.breaker };
    this.#now = options.now ?? (() => performance.now());
    this.#random = options.random ?? Math.random;
    this.#affinity = new AffinityMap({
      ttlMs: options.affinityTtlMs ?? 600_000,
      maxEntries: options.affinityMaxEntries ?? 100_000,
    });
    this.#policy = options.policy ?? 'ours';
    this.#prefixBound = options.prefixBound ?? 8;
    this.#prefixMaxBlocks = options.prefixMaxBlocks ?? 16_384;
    this.#hook = options.pick;
  }

  /** Whether picks use the prompt's blocks: the gateway hashes them only then. */
  get prefixAware(): boolean {
    return this.#policy === 'ours';
  }

  /**
   * The ready replicas: gone ones are dropped (their leases still release), new ones added,
   * others updated. `restarting`: models none of whose replicas is here that come back by
   * themselves; their requests wait for them rather than being refused.
   */
  setReplicas(
    replicas: readonly RouteReplica[],
    restarting: ReadonlyMap<string, Restarting> = new Map(),
  ): void {
    const seen = new Set<string>();
    const touched = new Set<ModelGroup>();
    const now = this.#now();
    // A model's restart news changes whom its waiters may wait for.
    for (const model of this.#restarting.set(restarting, now)) {
      const group = this.#groups.get(model);
      if (group !== undefined) touched.add(group);
    }
    for (const replica of replicas) {
      seen.add(replica.id);
      let entry = this.#entries.get(replica.id);
      if (entry && entry.replica.model !== replica.model) {
        this.#remove(entry);
        touched.add(entry.group);
        entry = undefined;
      }
      if (entry) {
        entry.replica = replica;
        entry.capacity = Math.max(1, replica.capacity);
      } else {
        const group = this.#group(replica.model);
        entry = new ReplicaEntry(
          replica,
          group,
          new Breaker(this.#breakerOptions),
          new PrefixIndex(this.#prefixMaxBlocks),
        );
        group.entries.push(entry);
        this.#entries.set(replica.id, entry);
      }
      touched.add(entry.group);
    }
    for (const [id, entry] of this.#entries) {
      if (seen.has(id)) continue;
      this.#remove(entry);
      touched.add(entry.group);
    }
    for (const group of touched) {
      this.#refuseStranded(group, now);
      if (group.head) {
        this.#drain(group, now);
        this.#armWake(group, now);
      }
      this.#dropIfIdle(group);
    }
  }

  recordReading(id: string, reading: LoadReading): void {
    const entry = this.#entries.get(id);
    if (entry === undefined) return;
    entry.reading = reading;
    entry.inFlightAtReading = entry.inFlight + entry.peerInFlight;
    const base = reading.running + reading.waiting + (reading.kvUsage ?? 0) * KV_WEIGHT;
    entry.base = Number.isNaN(base) ? STALE_PENALTY : base;
    entry.scrapeError = undefined;
    if (!entry.breaker.answered(reading.at)) return;
    this.#onEvidence?.(id, answered);
    if (entry.group.head) this.#drain(entry.group, this.#now());
  }

  /**
   * The requests other workers of this gateway have on each replica now (a replica not named
   * has none): counted in its load and against its capacity as the worker's own are. A
   * replica that has room again serves this worker's waiters.
   */
  setPeerInFlight(counts: ReadonlyMap<string, number>): void {
    const now = this.#now();
    const freed = new Set<ModelGroup>();
    for (const entry of this.#entries.values()) {
      const n = counts.get(entry.replica.id) ?? 0;
      if (n === entry.peerInFlight) continue;
      if (n < entry.peerInFlight && entry.group.head) freed.add(entry.group);
      entry.peerInFlight = n;
    }
    for (const group of freed) this.#drain(group, now);
  }

  /** Calls `listener` after each lease taken or released (one listener). */
  onInFlightChange(listener: () => void): void {
    this.#onInFlight = listener;
  }

  /** This router's own requests per replica now (replicas with none left out). */
  ownInFlight(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [id, entry] of this.#entries) if (entry.inFlight > 0) counts.set(id, entry.inFlight);
    return counts;
  }

  /** A scrape failed; `unreachable` (the default) opens the replica's breaker. */
  recordScrapeFailure(id: string, error: string, kind: ScrapeFailureKind = 'unreachable'): void {
    const entry = this.#entries.get(id);
    if (entry === undefined) return;
    entry.scrapeError = error;
    if (kind !== 'unreachable') return;
    const now = this.#now();
    const opened = entry.breaker.failed(now);
    if (opened) this.#onEvidence?.(id, failed);
    if (opened && entry.group.head) this.#armWake(entry.group, now);
  }

  /** Calls `listener` with each piece of evidence that changed a replica's breaker here (one listener). */
  onBreakerEvidence(listener: (replica: string, e: BreakerEvidence) => void): void {
    this.#onEvidence = listener;
  }

  /** Takes the breakers' states another process holds (a gateway worker, its primary's: one per replica). */
  adoptBreakers(states: ReadonlyMap<string, BreakerSnapshot>): void {
    const now = this.#now();
    const touched = new Set<ModelGroup>();
    for (const [id, state] of states) {
      const entry = this.#entries.get(id);
      if (entry === undefined) continue;
      entry.breaker.adopt(state, now);
      touched.add(entry.group);
    }
    for (const group of touched) {
      if (!group.head) continue;
      this.#drain(group, now);
      this.#armWake(group, now);
    }
  }

  /** Models with at least one ready replica. */
  models(): string[] {
    const names: string[] = [];
    for (const group of this.#groups.values()) if (group.entries.length > 0) names.push(group.model);
    return names;
  }

  has(model: string): boolean {
    const group = this.#groups.get(model);
    return group !== undefined && group.entries.length > 0;
  }

  /** How many replicas a model has now (a conversation key only matters with two or more). */
  replicaCount(model: string): number {
    return this.#groups.get(model)?.entries.length ?? 0;
  }

  /**
   * A replica at once, without a promise, when one is free and nobody waits before this
   * request: the common case, kept cheap. Undefined otherwise; then acquire() decides.
   */
  tryAcquire(model: string, options?: Omit<AcquireOptions, 'signal'>): Lease | undefined {
    const group = this.#groups.get(model);
    if (group === undefined || group.entries.length === 0 || group.head) return undefined;
    const entry = this.#pick(group, options?.exclude, options, this.#now());
    return entry ? this.#lease(entry, 0) : undefined;
  }

  /** A replica for one request, at once or after a wait in the model's queue; rejects with RouterError. */
  acquire(model: string, options?: AcquireOptions): Promise<Lease> {
    const exclude = options?.exclude;
    const now = this.#now();
    const known = this.#groups.get(model);
    // None in the table: only a model coming back by itself, in time for this request, keeps it.
    const refused =
      known === undefined || known.entries.length === 0
        ? this.#restarting.strandedBy(model, { exclude, deadline: now + this.#queueTimeoutMs, now })
        : undefined;
    if (refused !== undefined) return Promise.reject(refused);
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(cancelled(model));
    const group = known ?? this.#group(model);
    // Earlier requests first: a slot that came free without a wake-up (a cooldown just over) is theirs.
    if (group.head) this.#drain(group, now);
    const entry = this.#pick(group, exclude, options, now);
    if (entry) return Promise.resolve(this.#lease(entry, 0));
    if (group.entries.length > 0 && !this.#hasCandidate(group, exclude))
      return Promise.reject(allExcluded(model));
    if (group.queued >= this.#maxQueued) {
      return Promise.reject(queueFull(model, group.queued, BUSY_RETRY_AFTER_S));
    }
    return new Promise<Lease>((resolve, reject) => {
      this.#enqueue({
        group,
        wants: options,
        exclude,
        signal,
        enqueuedAt: now,
        resolve,
        reject,
        timer: undefined,
        onAbort: undefined,
        prev: undefined,
        next: undefined,
      });
    });
  }

  loads(): ReplicaLoad[] {
    const now = this.#now();
    const loads: ReplicaLoad[] = [];
    for (const entry of this.#entries.values()) {
      const reading = entry.reading;
      const load: ReplicaLoad = {
        id: entry.replica.id,
        model: entry.replica.model,
        inFlight: entry.inFlight,
        stale: reading === undefined || now - reading.at > this.#staleMs,
        breaker: entry.breaker.state(now),
        score: scoreOf(entry, now, this.#staleMs),
        capacity: entry.capacity,
        scrapeError: entry.scrapeError,
      };
      if (reading) load.reading = reading;
      loads.push(load);
    }
    return loads;
  }

  /** Requests waiting for a replica: of one model, or of all. */
  queued(model?: string): number {
    if (model !== undefined) return this.#groups.get(model)?.queued ?? 0;
    let total = 0;
    for (const group of this.#groups.values()) total += group.queued;
    return total;
  }

  /** The gateway's requests in flight: of one model, or of all. */
  inFlight(model?: string): number {
    if (model !== undefined) return this.#groups.get(model)?.inFlight ?? 0;
    let total = 0;
    for (const group of this.#groups.values()) total += group.inFlight;
    return total;
  }

  /** Whether a request may go to the replica now: not full, not excluded, its breaker letting it through. */
  #available(entry: ReplicaEntry, exclude: ReadonlySet<string> | undefined, now: number): boolean {
    return !isFull(entry) && !isExcluded(entry, exclude) && entry.breaker.allows(now);
  }

  /** The replica for one request by the policy (or the pick hook), among the available ones; undefined when none is. */
  #pick(
    group: ModelGroup,
    exclude: ReadonlySet<string> | undefined,
    wants: Wants,
    now: number,
  ): ReplicaEntry | undefined {
    if (this.#hook !== undefined) {
      const picked = this.#hooked(group, exclude, wants, now);
      if (picked !== null) return picked;
    }
    switch (this.#policy) {
      case 'round-robin':
        return this.#roundRobin(group, exclude, now);
      case 'random':
        return this.#anyOf(group, exclude, now);
      case 'least-loaded':
        return this.#leastLoaded(group, exclude, now);
      default:
        return this.#ours(group, exclude, wants, now);
    }
  }

  /**
   * The least score among the available replicas; ties go to fewer in flight, then to
   * chance (reservoir sampling, so nothing is allocated).
   */
  #leastLoaded(
    group: ModelGroup,
    exclude: ReadonlySet<string> | undefined,
    now: number,
  ): ReplicaEntry | undefined {
    const staleMs = this.#staleMs;
    let best: ReplicaEntry | undefined;
    let bestScore = Infinity;
    let ties = 0;
    for (const entry of group.entries) {
      if (!this.#available(entry, exclude, now)) continue;
      const score = scoreOf(entry, now, staleMs);
      if (
        best === undefined ||
        score < bestScore ||
        (score === bestScore && entry.inFlight < best.inFlight)
      ) {
        best = entry;
        bestScore = score;
        ties = 1;
      } else if (score === bestScore && entry.inFlight === best.inFlight) {
        ties++;
        if (this.#random() * ties < 1) best = entry;
      }
    }
    return best;
  }

  /**
   * The least loaded, unless a replica within the bound holds more of the request: the
   * longest run of its prompt's leading blocks (within `prefixBound` × the fraction held of
   * the least score), then, among those holding as much, its conversation's last replica,
   * then less load. So a prefix is computed once, and a busy replica sheds new work to the
   * others (the load-imbalance guard), which then hold the prefix too. A prompt shorter
   * than a block keeps its conversation's replica within `affinityBound`, as before.
   */
  #ours(
    group: ModelGroup,
    exclude: ReadonlySet<string> | undefined,
    wants: Wants,
    now: number,
  ): ReplicaEntry | undefined {
    let best = this.#leastLoaded(group, exclude, now);
    if (best === undefined || wants === undefined) return best;
    const staleMs = this.#staleMs;
    const leastScore = scoreOf(best, now, staleMs);
    const prefix = wants.prefix;
    const affinityKey = wants.affinityKey;
    const bound = affinityKey === undefined ? undefined : this.#affinity.get(affinityKey, now);
    if (prefix !== undefined && prefix.length > 0 && group.entries.length > 1) {
      // Rank within the prefix bound by (blocks held, the conversation's own replica, less load).
      let bestMatch = best.prefix.matched(prefix);
      let bestScore = leastScore;
      for (const entry of group.entries) {
        if (entry === best || !this.#available(entry, exclude, now)) continue;
        const score = scoreOf(entry, now, staleMs);
        const match = entry.prefix.matched(prefix);
        if (match < bestMatch) continue;
        // The more of the prompt it holds, the more load it may carry beyond the least loaded.
        if (score > leastScore + (this.#prefixBound * match) / prefix.length) continue;
        if (match === bestMatch) {
          const isBound = entry.replica.id === bound;
          const bestIsBound = best.replica.id === bound;
          if (isBound === bestIsBound ? score >= bestScore : !isBound) continue;
        }
        best = entry;
        bestMatch = match;
        bestScore = score;
      }
      best.prefix.add(prefix);
    }
    if (bound !== undefined && bound !== best.replica.id && (prefix === undefined || prefix.length === 0)) {
      const entry = this.#entries.get(bound);
      if (
        entry !== undefined &&
        entry.group === group &&
        this.#available(entry, exclude, now) &&
        scoreOf(entry, now, staleMs) <= leastScore + this.#affinityBound
      ) {
        best = entry;
      }
    }
    if (affinityKey !== undefined) this.#affinity.set(affinityKey, best.replica.id, now);
    return best;
  }

  #roundRobin(
    group: ModelGroup,
    exclude: ReadonlySet<string> | undefined,
    now: number,
  ): ReplicaEntry | undefined {
    const entries = group.entries;
    const n = entries.length;
    for (let i = 0; i < n; i++) {
      const at = (group.cursor + i) % n;
      const entry = entries[at] as ReplicaEntry;
      if (!this.#available(entry, exclude, now)) continue;
      group.cursor = (at + 1) % n;
      return entry;
    }
    return undefined;
  }

  /** Any available replica, by chance. */
  #anyOf(group: ModelGroup, exclude: ReadonlySet<string> | undefined, now: number): ReplicaEntry | undefined {
    let chosen: ReplicaEntry | undefined;
    let seen = 0;
    for (const entry of group.entries) {
      if (!this.#available(entry, exclude, now)) continue;
      seen++;
      if (this.#random() * seen < 1) chosen = entry;
    }
    return chosen;
  }

  /** The pick hook's choice among the available replicas; null to leave it to the policy, undefined when none is available. */
  #hooked(
    group: ModelGroup,
    exclude: ReadonlySet<string> | undefined,
    wants: Wants,
    now: number,
  ): ReplicaEntry | undefined | null {
    const candidates: RouteReplica[] = [];
    for (const entry of group.entries)
      if (this.#available(entry, exclude, now)) candidates.push(entry.replica);
    if (candidates.length === 0) return undefined;
    const id = (this.#hook as PickHook)(candidates, {
      model: group.model,
      requestId: wants?.requestId,
      affinityKey: wants?.affinityKey,
    });
    const entry = id === undefined ? undefined : this.#entries.get(id);
    return entry !== undefined && entry.group === group && this.#available(entry, exclude, now)
      ? entry
      : null;
  }

  #lease(entry: ReplicaEntry, queuedMs: number): Lease {
    entry.inFlight++;
    entry.group.inFlight++;
    this.#onInFlight?.();
    // Picked through a half-open breaker: this request is its trial.
    const trial = entry.breaker.admit();
    return new RouterLease(entry, queuedMs, trial, this.#release);
  }

  #released(entry: ReplicaEntry, trial: boolean, outcome: Outcome, key: string | undefined): void {
    const group = entry.group;
    entry.inFlight--;
    group.inFlight--;
    this.#onInFlight?.();
    const now = this.#now();
    const breaker = entry.breaker;
    const version = breaker.version;
    let opened = false;
    let evidence: BreakerEvidence | undefined;
    if (outcome === 'ok') {
      breaker.succeeded(now, trial);
      evidence = trial ? trialSucceeded : succeeded;
    } else if (outcome === 'failed' || outcome === 'stalled') {
      opened = breaker.failed(now, { needsRequest: outcome === 'stalled' });
      evidence = outcome === 'stalled' ? hung : failed;
    } else if (outcome === 'refused' && key !== undefined) {
      opened = breaker.refused(now, key, trial);
      evidence = { kind: 'refused', key };
    } else {
      breaker.cancelled(trial);
    }
    if (evidence !== undefined && breaker.version !== version) this.#onEvidence?.(entry.replica.id, evidence);
    if (opened && group.head && !entry.removed) this.#armWake(group, now);
    if (entry.removed) this.#dropIfIdle(group);
    else if (group.head) this.#drain(group, now);
  }

  /** Whether any replica could ever take the request: one not excluded. */
  #hasCandidate(group: ModelGroup, exclude: ReadonlySet<string> | undefined): boolean {
    if (exclude === undefined || exclude.size === 0) return group.entries.length > 0;
    for (const entry of group.entries) if (!exclude.has(entry.replica.id)) return true;
    return false;
  }

  #enqueue(waiter: Waiter): void {
    const { group, signal } = waiter;
    group.push(waiter);
    waiter.timer = setTimeout(() => {
      this.#timedOut(waiter);
    }, this.#queueTimeoutMs);
    waiter.timer.unref();
    if (signal) {
      waiter.onAbort = () => {
        this.#leave(waiter);
        waiter.reject(cancelled(group.model));
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
    }
    this.#armWake(group, waiter.enqueuedAt);
  }

  /** Takes a waiter out of its queue and drops its timer and abort listener. */
  #leave(waiter: Waiter): void {
    waiter.group.unlink(waiter);
    clearTimeout(waiter.timer);
    if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    this.#dropIfIdle(waiter.group);
  }

  #timedOut(waiter: Waiter): void {
    const group = waiter.group;
    this.#leave(waiter);
    const now = this.#now();
    const waited = this.#queueTimeoutMs;
    const restarting = group.entries.length === 0 ? this.#restarting.timedOut(group.model, now) : undefined;
    if (restarting !== undefined) {
      waiter.reject(restarting);
      return;
    }
    // Every candidate cooling down: the replicas are failing, not busy; retry when one may be back.
    let reopens = Infinity;
    for (const entry of group.entries) {
      if (isExcluded(entry, waiter.exclude)) continue;
      if (!entry.breaker.isCoolingDown(now)) {
        reopens = Infinity;
        break;
      }
      reopens = Math.min(reopens, entry.breaker.openUntil);
    }
    if (reopens !== Infinity) {
      const retryAfterS = Math.min(30, Math.max(1, Math.ceil((reopens - now) / 1000)));
      waiter.reject(failingTimeout(group.model, waited, retryAfterS));
    } else {
      waiter.reject(queueTimeout(group.model, waited, BUSY_RETRY_AFTER_S));
    }
  }

  /**
   * Serves waiters in arrival order while slots are free: one slot, one waiter, so a
   * release wakes exactly one. A waiter that excludes the free replica is passed over (it
   * is a retry that must go elsewhere); one that excludes nothing and finds nothing means
   * nothing is free, so the scan stops there.
   */
  #drain(group: ModelGroup, now: number): void {
    let waiter = group.head;
    while (waiter) {
      const next = waiter.next;
      const entry = this.#pick(group, waiter.exclude, waiter.wants, now);
      if (entry) {
        this.#leave(waiter);
        waiter.resolve(this.#lease(entry, now - waiter.enqueuedAt));
      } else if (waiter.exclude === undefined || waiter.exclude.size === 0) {
        return;
      }
      waiter = next;
    }
  }

  /** Arms a wake-up for the end of the earliest cooldown, so waiters get the half-open trial. */
  #armWake(group: ModelGroup, now: number): void {
    let at = Infinity;
    for (const entry of group.entries) {
      if (entry.breaker.isCoolingDown(now) && entry.breaker.openUntil < at) at = entry.breaker.openUntil;
    }
    if (at === Infinity) return;
    if (group.wake !== undefined && group.wakeAt <= at) return;
    clearTimeout(group.wake);
    group.wakeAt = at;
    group.wake = setTimeout(() => {
      group.wake = undefined;
      if (!group.head) return;
      const fired = this.#now();
      this.#drain(group, fired);
      if (group.queued > 0) this.#armWake(group, fired);
    }, at - now);
    group.wake.unref();
  }

  /** Waiters that no replica left could ever serve, nor one coming back in their wait: refused now rather than at their timeout. */
  #refuseStranded(group: ModelGroup, now: number): void {
    let waiter = group.head;
    while (waiter) {
      const next = waiter.next;
      const refused = this.#hasCandidate(group, waiter.exclude)
        ? undefined
        : group.entries.length > 0
          ? allExcluded(group.model)
          : this.#restarting.strandedBy(group.model, {
              exclude: waiter.exclude,
              deadline: waiter.enqueuedAt + this.#queueTimeoutMs,
              now,
            });
      if (refused !== undefined) {
        this.#leave(waiter);
        waiter.reject(refused);
      }
      waiter = next;
    }
  }

  #group(model: string): ModelGroup {
    let group = this.#groups.get(model);
    if (group === undefined) {
      group = new ModelGroup(model);
      this.#groups.set(model, group);
    }
    return group;
  }

  #remove(entry: ReplicaEntry): void {
    entry.removed = true;
    this.#entries.delete(entry.replica.id);
    const group = entry.group;
    group.entries = group.entries.filter((e) => e !== entry);
  }

  /** A model with no replica, no waiter and no request in flight is forgotten. */
  #dropIfIdle(group: ModelGroup): void {
    if (group.entries.length > 0 || group.head || group.inFlight > 0) return;
    clearTimeout(group.wake);
    group.wake = undefined;
    if (this.#groups.get(group.model) === group) this.#groups.delete(group.model);
  }
}
