export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerOptions {
  /** The first cooldown, ms (default 1 s); it doubles with each consecutive opening. */
  initialMs?: number;
  /** The longest cooldown, ms (default 30 s). */
  maxMs?: number;
}

/**
 * One replica's circuit breaker. It opens on the first failure: the gateway retries a
 * failed request elsewhere at once, and a refused connection means the engine is gone, so
 * waiting for a threshold would only send more requests to a dead end. After the cooldown
 * it is half-open: one trial request goes through (or a scrape that answers closes it).
 *
 * Half-open is not stored: it is "open, and the cooldown is over", read from the clock the
 * caller passes in, so no timer is needed to get there.
 */
export class Breaker {
  readonly #initialMs: number;
  readonly #maxMs: number;
  #open = false;
  #openUntil = 0;
  /** Openings since the last request that succeeded: the exponent of the cooldown. */
  #openings = 0;
  /** Whether the half-open trial is in flight. */
  #trial = false;
  /** Opened by a request that hung: an answering scrape does not close it, only a trial request. */
  #needsRequest = false;

  constructor(options: BreakerOptions = {}) {
    this.#initialMs = options.initialMs ?? 1000;
    this.#maxMs = options.maxMs ?? 30_000;
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
    this.#openings = 0;
  }

  /**
   * A request failed before any byte reached the client, or the replica refused a
   * connection. Returns true when this opened the breaker (so the caller arms a wake-up).
   */
  failed(now: number, o: { needsRequest?: boolean } = {}): boolean {
    if (o.needsRequest === true) this.#needsRequest = true;
    // Requests that were already in flight when it opened fail too: one incident, one opening.
    if (this.#open && now < this.#openUntil) return false;
    const cooldown = Math.min(this.#maxMs, this.#initialMs * 2 ** Math.min(this.#openings, 30));
    this.#openings++;
    this.#open = true;
    this.#openUntil = now + cooldown;
    this.#trial = false;
    return true;
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

  #close(): void {
    this.#open = false;
    this.#trial = false;
    this.#needsRequest = false;
  }
}
