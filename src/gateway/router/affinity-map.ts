interface Binding {
  id: string;
  at: number;
}

/**
 * Conversation key -> the replica that served it last, least recently used first. A Map
 * keeps insertion order, and every use re-inserts its key, so the oldest binding is always
 * the first: both the size bound and the TTL evict from the front in O(1).
 */
export class AffinityMap {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #bindings = new Map<string, Binding>();

  constructor(options: { ttlMs: number; maxEntries: number }) {
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = Math.max(1, options.maxEntries);
  }

  get size(): number {
    return this.#bindings.size;
  }

  get(key: string, now: number): string | undefined {
    const binding = this.#bindings.get(key);
    if (binding === undefined) return undefined;
    if (now - binding.at > this.#ttlMs) {
      this.#bindings.delete(key);
      return undefined;
    }
    return binding.id;
  }

  set(key: string, id: string, now: number): void {
    const bindings = this.#bindings;
    const known = bindings.get(key);
    if (known !== undefined) {
      // Re-inserted to move it to the back; the object is reused, nothing is allocated.
      bindings.delete(key);
      known.id = id;
      known.at = now;
      bindings.set(key, known);
    } else {
      bindings.set(key, { id, at: now });
    }
    // One or two evictions per insertion keep up with the insertions themselves.
    for (let i = 0; i < 2; i++) {
      const oldest = bindings.entries().next().value;
      if (oldest === undefined) break;
      if (bindings.size <= this.#maxEntries && now - oldest[1].at <= this.#ttlMs) break;
      bindings.delete(oldest[0]);
    }
  }
}
