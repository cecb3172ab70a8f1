import { generateSecret } from '../../../core/secrets.js';
import type { Store } from '../../../store/store.js';
import type { EngineKeys } from '../engine-keys.js';

const keyPrefix = 'kube/engine-key/';

/**
 * Each model's engine key under Kubernetes (every pod of a model shares it): sealed in the
 * store, so every control plane reads the same one, made once, opened once here.
 */
export class ModelKeys {
  readonly #store: Store;
  readonly #keys: EngineKeys;
  readonly #open = new Map<string, string>();

  constructor(o: { store: Store; keys: EngineKeys }) {
    this.#store = o.store;
    this.#keys = o.keys;
  }

  async keyOf(model: string): Promise<string> {
    const known = this.#open.get(model);
    if (known !== undefined) return known;
    const id = `${keyPrefix}${model}`;
    let sealed = await this.#store.shared.get(id);
    sealed ??= await this.#store.shared.putIfAbsent(id, this.#keys.seal(id, generateSecret('engine')));
    const key = this.#keys.open(id, sealed);
    this.#open.set(model, key);
    return key;
  }

  /** A removed model's key: made again should it come back (its Secret was deleted with it). */
  forget(model: string): void {
    this.#open.delete(model);
  }
}
