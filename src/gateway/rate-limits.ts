/**
 * Requests and tokens per minute, per key: a ring of one-second buckets each, so a check
 * and a charge are O(1) and the window slides (no burst of twice the limit at a minute's
 * edge, as with fixed windows).
 */
const slots = 60;

class Window {
  readonly counts = new Float64Array(slots);
  /** The second each bucket counts; a bucket of a second more than a minute ago counts nothing. */
  readonly seconds = new Float64Array(slots);

  sum(second: number): number {
    let total = 0;
    for (let k = 0; k < slots; k++) if (second - (this.seconds[k] ?? 0) < slots) total += this.counts[k] ?? 0;
    return total;
  }

  add(second: number, n: number): void {
    const i = second % slots;
    if (this.seconds[i] !== second) {
      this.counts[i] = 0;
      this.seconds[i] = second;
    }
    this.counts[i] = (this.counts[i] ?? 0) + n;
  }

  /** Seconds until the oldest counted bucket leaves the window. */
  retryAfter(second: number): number {
    let oldest = second;
    for (let k = 0; k < slots; k++) {
      const s = this.seconds[k] ?? 0;
      if ((this.counts[k] ?? 0) > 0 && second - s < slots && s < oldest) oldest = s;
    }
    return Math.max(1, oldest + slots - second);
  }
}

export interface LimitRefusal {
  message: string;
  retryAfterS: number;
}

export class RateLimits {
  readonly #requests = new Map<string, Window>();
  readonly #tokens = new Map<string, Window>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Counts a request against its key's limits, or refuses it (and counts nothing). */
  admit(key: string, limits: { rpm: number | null; tpm: number | null }): LimitRefusal | undefined {
    const second = Math.floor(this.#now() / 1000);
    if (limits.tpm !== null) {
      const t = this.#tokens.get(key);
      if (t !== undefined && t.sum(second) >= limits.tpm) {
        return {
          message: `key "${key}" used its ${limits.tpm} tokens per minute: retry after the window moves on, or ask an admin for a higher tpm`,
          retryAfterS: t.retryAfter(second),
        };
      }
    }
    if (limits.rpm !== null) {
      let r = this.#requests.get(key);
      if (r === undefined) {
        r = new Window();
        this.#requests.set(key, r);
      }
      if (r.sum(second) >= limits.rpm) {
        return {
          message: `key "${key}" made its ${limits.rpm} requests per minute: retry after the window moves on, or ask an admin for a higher rpm`,
          retryAfterS: r.retryAfter(second),
        };
      }
      r.add(second, 1);
    }
    return undefined;
  }

  /** Charges the tokens a response used (known only once it is done). */
  charge(key: string, tokens: number, limits: { tpm: number | null }): void {
    if (limits.tpm === null || tokens <= 0) return;
    let t = this.#tokens.get(key);
    if (t === undefined) {
      t = new Window();
      this.#tokens.set(key, t);
    }
    t.add(Math.floor(this.#now() / 1000), tokens);
  }
}
