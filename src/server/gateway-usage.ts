import type { UsageDelta, UsageRepository } from '../store/store.js';

import type { EventPublisher } from './events/event-hub.js';

/**
 * The usage that the gateway in the control plane's process counted, kept as the control
 * plane keeps any: written to the store, and told to GET /events (the console reads it
 * again). It is the gateway's usage sink there (src/gateway/services.ts, wired in src/cli);
 * POST /gateway/usage does the same for gateways of their own.
 */
export class StoreUsage {
  readonly #usage: UsageRepository;
  readonly #events: EventPublisher;

  constructor(usage: UsageRepository, events: EventPublisher) {
    this.#usage = usage;
    this.#events = events;
  }

  async write(rows: readonly UsageDelta[]): Promise<void> {
    await this.#usage.add(rows);
    if (rows.length > 0) this.#events.publish('usage');
  }
}
