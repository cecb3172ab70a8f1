import type { Logger } from 'pino';

import { messageOf } from '../../../core/errors.js';
import type { KubeCluster } from '../../../kube/client.js';
import type { KEvent } from '../../../kube/failures.js';

export interface WarningEventsOptions {
  cluster: Pick<KubeCluster, 'warningEvents'>;
  logger: Logger;
  /** The least time between two lists. */
  maxAgeMs: number;
}

/**
 * The namespace's Warning events, listed at most once per maxAgeMs and only while some replica is
 * not ready (KubeFleet's pass says so): the views read this copy, never the API. A list the API
 * refuses (the Role lacks events) is said once in the log; the views then go without events.
 */
export class WarningEvents {
  readonly #o: WarningEventsOptions;
  #events: readonly KEvent[] = [];
  #at = Number.NEGATIVE_INFINITY;
  #refused: string | undefined;

  constructor(o: WarningEventsOptions) {
    this.#o = o;
  }

  get list(): readonly KEvent[] {
    return this.#events;
  }

  /** Lists again when the copy is older than maxAgeMs; whether what it holds changed. */
  async refresh(now = Date.now()): Promise<boolean> {
    if (now - this.#at < this.#o.maxAgeMs) return false;
    this.#at = now;
    let next: KEvent[];
    try {
      next = await this.#o.cluster.warningEvents();
    } catch (e) {
      const message = messageOf(e);
      if (this.#refused !== message)
        this.#o.logger.warn(
          { err: message },
          "could not list the namespace's events: replicas show less of why",
        );
      this.#refused = message;
      return false;
    }
    this.#refused = undefined;
    const changed = signature(next) !== signature(this.#events);
    this.#events = next;
    return changed;
  }

  /** Everything is ready: nothing to explain, nothing to keep. */
  clear(): void {
    this.#events = [];
    this.#at = Number.NEGATIVE_INFINITY;
  }
}

const signature = (events: readonly KEvent[]) =>
  events.map((e) => `${e.metadata.uid ?? ''}:${e.count ?? 1}`).join(',');
