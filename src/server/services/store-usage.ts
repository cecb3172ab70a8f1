import type { UsageDelta, UsageRepository } from '../../store/store.js';
import type { EventPublisher } from '../events/event-hub.js';

/**
 * Usage a gateway counted, kept as the control plane keeps any: written to the store, and
 * told to GET /events (the console reads it again). The sink of the gateway in the control
 * plane's process (src/gateway/services.ts, wired in src/cli), and what POST /gateway/usage
 * does with the rows of gateways of their own.
 */
export class StoreUsage {
  readonly #usage: Pick<UsageRepository, 'add'>;
  readonly #events: Pick<EventPublisher, 'publish'> | undefined;

  constructor(usage: Pick<UsageRepository, 'add'>, events: Pick<EventPublisher, 'publish'> | undefined) {
    this.#usage = usage;
    this.#events = events;
  }

  async write(rows: readonly UsageDelta[]): Promise<void> {
    await this.#usage.add(rows);
    if (rows.length > 0) this.#events?.publish('usage');
  }
}
