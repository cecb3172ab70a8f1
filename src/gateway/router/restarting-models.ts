import type { CatalogEntry } from '../../protocol/routes.js';

import { noReplica, restartTimeout, restartTooLate } from './refusals.js';
import type { Restarting, RouterError } from './types.js';

/** Retry-After for a model whose restarted engine is loading (as for one starting: `no replica is ready`). */
const LOADING_RETRY_AFTER_S = 10;

/**
 * The models with no replica in the route table that come back by themselves (a failed
 * engine its launcher starts again), for the router: whether a request for one may wait,
 * within its wait, and what it is told when it may not or the wait runs out.
 */
export class RestartingModels {
  #models = new Map<string, { dueAt: number | undefined; reason: string }>();
  readonly #waitMs: number;

  /** `waitMs`: how long a request may wait in its model's queue. */
  constructor(waitMs: number) {
    this.#waitMs = waitMs;
  }

  /** Takes the route table's news at `now` (the router's clock); returns the models it was or is about. */
  set(restarting: ReadonlyMap<string, Restarting>, now: number): Set<string> {
    const changed = new Set([...this.#models.keys(), ...restarting.keys()]);
    this.#models = new Map(
      [...restarting].map(([model, r]) => [
        model,
        { dueAt: r.dueInMs === undefined ? undefined : now + r.dueInMs, reason: r.reason },
      ]),
    );
    return changed;
  }

  /**
   * Why a request for a model with no replica in the table must go now; undefined while the
   * model comes back by itself before `deadline`, the end of the request's wait.
   */
  strandedBy(
    model: string,
    o: { exclude: ReadonlySet<string> | undefined; deadline: number; now: number },
  ): RouterError | undefined {
    const back = this.#models.get(model);
    // A retry must go to a replica not tried yet: which one comes back is not known here.
    if (back === undefined || (o.exclude !== undefined && o.exclude.size > 0)) return noReplica(model);
    if (back.dueAt === undefined || back.dueAt <= o.deadline) return undefined;
    const dueInS = secondsUntil(back.dueAt, o.now);
    return restartTooLate(model, { reason: back.reason, waitMs: this.#waitMs, dueInS });
  }

  /** What a request that waited its whole wait for the model's restart is told; undefined when it is not restarting. */
  timedOut(model: string, now: number): RouterError | undefined {
    const back = this.#models.get(model);
    if (back === undefined) return undefined;
    const retryAfterS =
      back.dueAt !== undefined && back.dueAt > now ? secondsUntil(back.dueAt, now) : LOADING_RETRY_AFTER_S;
    return restartTimeout(model, { reason: back.reason, waitedMs: this.#waitMs, retryAfterS });
  }
}

/**
 * The route table's models that come back by themselves, as the router takes them: each
 * restart's due time (the launcher's wall clock) as ms from `wallNow`.
 */
export function restartingModels(
  models: readonly Pick<CatalogEntry, 'name' | 'restarting'>[],
  wallNow: number,
): Map<string, Restarting> {
  const out = new Map<string, Restarting>();
  for (const m of models) {
    const r = m.restarting;
    if (r === undefined) continue;
    const at = r.at === undefined ? Number.NaN : Date.parse(r.at);
    out.set(m.name, {
      reason: r.reason,
      ...(Number.isNaN(at) ? {} : { dueInMs: Math.max(0, at - wallNow) }),
    });
  }
  return out;
}

/** Whole seconds from `now` to `at` (ms), for Retry-After: at least 1, at most 5 minutes (other hosts' clocks may be off). */
function secondsUntil(at: number, now: number): number {
  return Math.min(300, Math.max(1, Math.ceil((at - now) / 1000)));
}
