import type { Logger } from 'pino';

import { messageOf } from '../../../core/errors.js';
import { generateSecret } from '../../../core/secrets.js';
import type { ReplicaRecord } from '../../../store/store.js';
import type { EngineKeys } from '../engine-keys.js';

/**
 * Each replica's engine key: made with the replica and sealed for the store, opened once from
 * it. A replica whose stored key this control plane's secret does not open is "unkeyed":
 * placement replaces it.
 */
export class ReplicaKeys {
  readonly #keys: EngineKeys;
  readonly #logger: Logger;
  /** Engine keys opened (or made) here, by replica id. */
  readonly #open = new Map<string, string>();
  /** Replicas whose stored keys this control plane's secret does not open. */
  readonly #unkeyed = new Set<string>();

  constructor(o: { keys: EngineKeys; logger: Logger }) {
    this.#keys = o.keys;
    this.#logger = o.logger;
  }

  /** A new replica's key, sealed for the store. */
  make(id: string): string {
    const key = generateSecret('engine');
    this.#open.set(id, key);
    return this.#keys.seal(id, key);
  }

  /** A replica's engine key, opened once; undefined (said once in the log) when it cannot be opened. */
  keyOf(r: ReplicaRecord): string | undefined {
    let key = this.#open.get(r.id);
    if (key === undefined) {
      try {
        key = this.#keys.open(r.id, r.sealed_key);
      } catch (e) {
        if (!this.#unkeyed.has(r.id))
          this.#logger.error(
            { replica: r.id, err: messageOf(e) },
            'engine key unreadable: the replica is replaced',
          );
        this.#unkeyed.add(r.id);
        return undefined;
      }
      this.#open.set(r.id, key);
    }
    return key;
  }

  /** Forgets the keys of replicas no longer placed. */
  keep(live: ReadonlySet<string>): void {
    for (const id of this.#open.keys()) if (!live.has(id)) this.#open.delete(id);
    for (const id of this.#unkeyed) if (!live.has(id)) this.#unkeyed.delete(id);
  }
}
