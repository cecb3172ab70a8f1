import type { Logger } from 'pino';

import type { EngineRunner } from './engine-runners.js';

export interface AdoptionGraceOptions {
  runner: Pick<EngineRunner, 'unclaimed' | 'releaseUnclaimed'>;
  logger: Logger;
  /**
   * How long engines an earlier agent left running, and the last saved assignment does not
   * place here, are kept while no control plane has said what this node runs (default 60 s).
   */
  graceMs?: number | undefined;
}

/**
 * The engines an earlier agent left running that no shard took over: kept while the control
 * plane has not said what this node runs (up to the grace), then stopped unless assigned.
 */
export class AdoptionGrace {
  readonly #o: AdoptionGraceOptions;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: AdoptionGraceOptions) {
    this.#o = options;
  }

  /** At the agent's start: after the grace, stops those `assigned` (the saved assignment's keys then) does not place. */
  start(assigned: () => ReadonlySet<string>): void {
    if (this.#o.runner.unclaimed().length === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#release(assigned());
    }, this.#o.graceMs ?? 60_000);
    this.#timer.unref();
  }

  /** A control plane said what runs here: the others are stopped now. */
  assigned(keys: ReadonlySet<string>): void {
    this.close();
    this.#release(keys);
  }

  close(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Stops the earlier agent's engines not taken over yet whose shard is not in `assigned`. */
  #release(assigned: ReadonlySet<string>): void {
    const stopped = this.#o.runner.releaseUnclaimed((key) => assigned.has(key));
    if (stopped.length > 0)
      this.#o.logger.warn(
        { shards: stopped },
        'stopping engines an earlier agent started for shards no longer placed here',
      );
  }
}
