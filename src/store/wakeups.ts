import { EventEmitter } from 'node:events';

import type { Kysely } from 'kysely';

import type { Database } from './schema.js';

/**
 * How control planes on one database wake each other (store.ts ClusterRepository.notify
 * and listen). PostgreSQL carries it (LISTEN/NOTIFY); one SQLite file has one control
 * plane, so there it stays in the process.
 */
export interface Wakeups {
  /** Sends on the connection `db` is (a transaction's: delivered when it commits). */
  send(db: Kysely<Database>, channel: string, payload: string): Promise<void>;
  listen(channel: string, fn: (payload: string) => void): () => void;
  close(): Promise<void>;
}

/** Wake-ups within one process (the SQLite store's). */
export class LocalWakeups implements Wakeups {
  readonly #emitter = new EventEmitter();

  constructor() {
    this.#emitter.setMaxListeners(0);
  }

  send(_db: Kysely<Database>, channel: string, payload: string): Promise<void> {
    // After the caller's transaction has had its turn to commit, as NOTIFY would be.
    setImmediate(() => this.#emitter.emit(channel, payload));
    return Promise.resolve();
  }

  listen(channel: string, fn: (payload: string) => void): () => void {
    this.#emitter.on(channel, fn);
    return () => this.#emitter.off(channel, fn);
  }

  close(): Promise<void> {
    this.#emitter.removeAllListeners();
    return Promise.resolve();
  }
}
