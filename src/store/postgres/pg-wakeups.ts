import { sql, type Kysely } from 'kysely';
import pg from 'pg';

import { resyncPayload } from '../store.js';
import type { Database } from '../schema.js';
import type { Wakeups } from '../wakeups.js';

/** PostgreSQL channels are identifiers: ours are prefixed so they never meet another program's. */
const channelName = (channel: string) => `llmgw_${channel}`;

/**
 * LISTEN/NOTIFY on one connection of its own, opened at the first listen. When that
 * connection drops (a database restart, a failover), it is opened again with backoff and
 * every listener is told `resync`: what was sent meanwhile is lost, so they read it all.
 */
export class PgWakeups implements Wakeups {
  readonly #url: string;
  readonly #types: pg.CustomTypesConfig;
  readonly #listeners = new Map<string, Set<(payload: string) => void>>();
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #closed = false;
  #retryMs = 250;
  #timer: NodeJS.Timeout | undefined;

  constructor(url: string, types: pg.CustomTypesConfig) {
    this.#url = url;
    this.#types = types;
  }

  async send(db: Kysely<Database>, channel: string, payload: string): Promise<void> {
    await sql`select pg_notify(${channelName(channel)}, ${payload})`.execute(db);
  }

  listen(channel: string, fn: (payload: string) => void): () => void {
    let set = this.#listeners.get(channel);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(channel, set);
      const client = this.#client;
      if (client !== undefined) void client.query(`LISTEN ${channelName(channel)}`).catch(() => undefined);
    }
    set.add(fn);
    this.#connect();
    return () => set.delete(fn);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#connecting;
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  #connect(): void {
    if (this.#closed || this.#client !== undefined || this.#connecting !== undefined) return;
    this.#connecting = this.#open().finally(() => (this.#connecting = undefined));
  }

  async #open(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#url, types: this.#types });
    const lost = () => {
      if (this.#client !== client) return;
      this.#client = undefined;
      this.#retry();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (n) => {
      const channel = n.channel.replace(/^llmgw_/, '');
      for (const fn of this.#listeners.get(channel) ?? []) fn(n.payload ?? '');
    });
    try {
      await client.connect();
      for (const channel of this.#listeners.keys()) await client.query(`LISTEN ${channelName(channel)}`);
    } catch {
      await client.end().catch(() => undefined);
      this.#retry();
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    const again = this.#retryMs > 250;
    this.#client = client;
    this.#retryMs = 250;
    // Back after a loss: whatever was sent meanwhile was missed.
    if (again) for (const set of this.#listeners.values()) for (const fn of set) fn(resyncPayload);
  }

  #retry(): void {
    if (this.#closed) return;
    const delay = this.#retryMs * (0.5 + Math.random());
    this.#retryMs = Math.min(this.#retryMs * 2, 10_000);
    this.#timer = setTimeout(() => this.#connect(), delay);
    this.#timer.unref();
  }
}
