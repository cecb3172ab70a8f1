export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerOptions {
  /** The first cooldown, ms (default 1 s); it doubles with each consecutive opening. */
  initialMs?: number;
  /** The longest cooldown, ms (default 30 s). */
  maxMs?: number;
  /** Distinct keys whose requests a healthy-looking replica refused with a 5xx since its last success that open it (default 3). */
  refusalKeys?: number;
}

/**
 * What a process of the gateway saw of a replica, as the breaker takes it: what a gateway
 * worker sends its primary, whose breaker of the replica is the one all processes follow.
 */
export type BreakerEvidence =
  /** A request failed before any byte reached its client, or a scrape found nothing listening. */
  | { kind: 'failed'; needsRequest: boolean }
  /** A request was answered; `trial`: it was the half-open trial. */
  | { kind: 'succeeded'; trial: boolean }
  /** A scrape of its metrics answered. */
  | { kind: 'answered' }
  /** It answered a 5xx to this key's request while its health check answered. */
  | { kind: 'refused'; key: string };

/** A breaker's state, as one process tells the others (`leftMs`: the cooldown left when it was taken). */
export interface BreakerSnapshot {
  open: boolean;
  leftMs: number;
  openings: number;
  needsRequest: boolean;
  refusedBy: readonly string[];
}

/**
 * One replica's circuit breaker. It opens on the first failure: the gateway retries a
 * failed request elsewhere at once, and a refused connection means the engine is gone, so
 * waiting for a threshold would only send more requests to a dead end. After the cooldown
 * it is half-open: one trial request goes through (or a scrape that answers closes it).
 *
 * What it counts is what does not come from one client: failures to connect, engines gone
 * silent, 5xx answers while the engine's health check fails too, and, for an engine whose
 * health check answers while it fails everything, 5xx answers to the requests of several
 * keys since its last success. A 5xx one key's request earns from a healthy engine is that
 * request's refusal, and counts for nothing else.
 *
 * Half-open is not stored: it is "open, and the cooldown is over", read from the clock the
 * caller passes in, so no timer is needed to get there.
 */
export class Breaker {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #refusalKeys: number;
  #open = false;
  #openUntil = 0;
  /** Openings since the last request that succeeded: the exponent of the cooldown. */
  #openings = 0;
  /** Whether the half-open trial is in flight. */
  #trial = false;
  /** Opened by a request that hung: an answering scrape does not close it, only a trial request. */
  #needsRequest = false;
  /** Keys whose requests it refused with a 5xx since its last success (at most refusalKeys). */
  readonly #refusedBy = new Set<string>();
  #version = 0;

  constructor(options: BreakerOptions = {}) {
    this.#initialMs = options.initialMs ?? 1000;
    this.#maxMs = options.maxMs ?? 30_000;
    this.#refusalKeys = options.refusalKeys ?? 3;
  }

  /** Changes with every change of what a snapshot holds: whether evidence changed anything. */
  get version(): number {
    return this.#version;
  }

  state(now: number): BreakerState {
    if (!this.#open) return 'closed';
    return now < this.#openUntil ? 'open' : 'half-open';
  }

  /** When the cooldown ends (meaningful while open). */
  get openUntil(): number {
    return this.#openUntil;
  }

  /** Whether it is open with the cooldown still running. */
  isCoolingDown(now: number): boolean {
    return this.#open && now < this.#openUntil;
  }

  /** Whether a request may go now: closed, or half-open with its trial not yet taken. */
  allows(now: number): boolean {
    return !this.#open || (!this.#trial && now >= this.#openUntil);
  }

  /** A request was sent after `allows`; true when it is the half-open trial. */
  admit(): boolean {
    if (!this.#open) return false;
    this.#trial = true;
    return true;
  }

  /** A request answered. Closes a half-open breaker; a success also resets the cooldown. */
  succeeded(now: number, trial: boolean): void {
    if (this.#open) {
      // A request sent before the opening proves nothing until the cooldown is over.
      if (!trial && now < this.#openUntil) return;
      this.#close();
    }
    if (this.#openings === 0 && this.#refusedBy.size === 0) return;
    this.#openings = 0;
    this.#refusedBy.clear();
    this.#version++;
  }

  /**
   * A request failed before any byte reached the client, or the replica refused a
   * connection. Returns true when this opened the breaker (so the caller arms a wake-up).
   */
  failed(now: number, o: { needsRequest?: boolean } = {}): boolean {
    if (o.needsRequest === true && !this.#needsRequest) {
      this.#needsRequest = true;
      this.#version++;
    }
    // Requests that were already in flight when it opened fail too: one incident, one opening.
    if (this.#open && now < this.#openUntil) return false;
    const cooldown = Math.min(this.#maxMs, this.#initialMs * 2 ** Math.min(this.#openings, 30));
    this.#openings++;
    this.#open = true;
    this.#openUntil = now + cooldown;
    this.#trial = false;
    this.#version++;
    return true;
  }

  /**
   * It answered a 5xx to `key`'s request while its health check answered: the request's
   * fault, unless keys enough got the same since its last success. Returns true when this
   * opened the breaker. A trial refused proves nothing: the next request is the trial.
   */
  refused(now: number, key: string, trial: boolean): boolean {
    if (trial && this.#open) this.#trial = false;
    if (this.#refusedBy.size < this.#refusalKeys && !this.#refusedBy.has(key)) {
      this.#refusedBy.add(key);
      this.#version++;
    }
    return this.#refusedBy.size >= this.#refusalKeys && this.failed(now);
  }

  /** The trial's client went away: it proved nothing, so the next request is the trial. */
  cancelled(trial: boolean): void {
    if (trial && this.#open) this.#trial = false;
  }

  /**
   * The replica's metrics answered: after the cooldown that is as good as a trial request,
   * and it closes the breaker. The cooldown is not reset: an engine whose metrics answer
   * while its requests fail would otherwise be retried every second forever. Returns true
   * when it closed.
   */
  answered(now: number): boolean {
    if (!this.#open || now < this.#openUntil || this.#needsRequest) return false;
    this.#close();
    return true;
  }

  /** Evidence another process saw (its trial flag is its own); true when it opened the breaker. */
  apply(e: BreakerEvidence, now: number): boolean {
    switch (e.kind) {
      case 'failed':
        return this.failed(now, { needsRequest: e.needsRequest });
      case 'succeeded':
        this.succeeded(now, e.trial);
        return false;
      case 'answered':
        this.answered(now);
        return false;
      case 'refused':
        return this.refused(now, e.key, false);
    }
  }

  snapshot(now: number): BreakerSnapshot {
    return {
      open: this.#open,
      leftMs: this.#open ? Math.max(0, this.#openUntil - now) : 0,
      openings: this.#openings,
      needsRequest: this.#needsRequest,
      refusedBy: [...this.#refusedBy],
    };
  }

  /** Takes the state another process holds for this replica (the gateway's primary's). */
  adopt(s: BreakerSnapshot, now: number): void {
    const until = s.open ? now + s.leftMs : 0;
    // A new opening, or a close: a trial taken under the old state is not this one's.
    if (s.open !== this.#open || (s.open && Math.abs(until - this.#openUntil) > 1)) this.#trial = false;
    this.#open = s.open;
    this.#openUntil = until;
    this.#openings = s.openings;
    this.#needsRequest = s.needsRequest;
    this.#refusedBy.clear();
    for (const k of s.refusedBy) this.#refusedBy.add(k);
    this.#version++;
  }

  #close(): void {
    this.#open = false;
    this.#trial = false;
    this.#needsRequest = false;
    this.#version++;
  }
}
