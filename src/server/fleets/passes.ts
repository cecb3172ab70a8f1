/**
 * Runs a fleet's pass (a placement, a Kubernetes reconcile) when poked: one at a time, and pokes
 * that come while one runs make one more pass after it, not one each. Both fleets use it.
 */
export class Passes {
  readonly #pass: () => Promise<void>;
  readonly #failed: (e: unknown) => void;
  readonly #paced: boolean;
  #running: Promise<void> | undefined;
  #again = false;
  /** While work is held (a rollout being recorded), pokes wait for it to end. */
  #held = 0;
  /** How long the last pass took: a paced pass waits at least as long before it starts. */
  #lastMs = 0;
  #stopped = false;

  /** `paced`: each pass waits as long as the last one took (placement never holds the event loop). */
  constructor(o: { pass: () => Promise<void>; failed: (e: unknown) => void; paced?: boolean }) {
    this.#pass = o.pass;
    this.#failed = o.failed;
    this.#paced = o.paced ?? false;
  }

  poke(): void {
    if (this.#stopped) return;
    if (this.#running !== undefined || this.#held > 0) {
      this.#again = true;
      return;
    }
    const run = this.#paced
      ? // Not at once, but after the I/O at hand and at least as long as the last pass took:
        // a storm of agents joining is placed in a few passes, not one per agent back to back.
        new Promise((resolve) => setTimeout(resolve, this.#lastMs)).then(async () => {
          const started = performance.now();
          await this.#pass();
          this.#lastMs = Math.min(performance.now() - started, 2000);
        })
      : this.#pass();
    this.#running = run
      .catch((e: unknown) => this.#failed(e))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  /** Waits until no pass runs. */
  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** Runs `work` with no pass running, and none started meanwhile (a poke waits for its end). */
  async held<T>(work: () => Promise<T>): Promise<T> {
    await this.settled();
    this.#held++;
    try {
      return await work();
    } finally {
      this.#held--;
    }
  }

  /** Runs the pass a poke asked for while work was held. */
  resume(): void {
    if (!this.#again) return;
    this.#again = false;
    this.poke();
  }

  /** No pass starts from now on; resolves when the one running ends. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }
}
