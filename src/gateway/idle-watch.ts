/** One exchange with an engine, as the watch sees it. */
export interface Watched {
  /** When the engine last sent a byte (or the request went out), performance.now() ms. */
  lastAt: number;
  /** The client is not reading: the engine was told to wait, so its silence is not a stall. */
  paused: boolean;
  /** Called once when the engine has been silent for the limit. */
  onIdle: () => void;
}

/**
 * Finds exchanges whose engine went silent: no timer per request, one sweep over those in
 * flight a few times per limit. A stalled engine (it answered its head and then nothing, or
 * not even that) would otherwise hold the client, and a slot of the gateway, for ever.
 */
export class IdleWatch {
  readonly #idleMs: number;
  readonly #items = new Set<Watched>();
  #timer: NodeJS.Timeout | undefined;

  constructor(idleMs: number) {
    this.#idleMs = idleMs;
  }

  get idleMs(): number {
    return this.#idleMs;
  }

  add(w: Watched): void {
    this.#items.add(w);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#sweep(), Math.max(50, Math.min(1000, this.#idleMs / 4)));
      this.#timer.unref();
    }
  }

  delete(w: Watched): void {
    this.#items.delete(w);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #sweep(): void {
    if (this.#items.size === 0) {
      this.stop();
      return;
    }
    const now = performance.now();
    for (const w of this.#items) {
      if (w.paused) {
        w.lastAt = now;
        continue;
      }
      if (now - w.lastAt < this.#idleMs) continue;
      this.#items.delete(w);
      w.onIdle();
    }
  }
}
