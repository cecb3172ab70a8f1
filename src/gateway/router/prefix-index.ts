/**
 * The prompt blocks the gateway has sent to one replica, least recently used first: what
 * its prefix cache most likely holds (llm-d's approximate prefix index, one per pod). A
 * Map keeps insertion order and every use re-inserts, so the oldest block is the first.
 *
 * Memory: a block is one small-integer key in a Map, about 40 bytes; the default bound of
 * 16,384 blocks (~1M tokens of prompt heads) is ~0.7 MB per replica at most.
 */
export class PrefixIndex {
  readonly #maxBlocks: number;
  readonly #blocks = new Map<number, true>();

  constructor(maxBlocks: number) {
    this.#maxBlocks = Math.max(1, maxBlocks);
  }

  get size(): number {
    return this.#blocks.size;
  }

  /** How many of `hashes`, from the first, it holds (chained hashes: a gap ends the match). */
  matched(hashes: readonly number[]): number {
    const blocks = this.#blocks;
    let n = 0;
    while (n < hashes.length && blocks.has(hashes[n] as number)) n++;
    return n;
  }

  /** The request's blocks were sent here: held, and the most recently used. */
  add(hashes: readonly number[]): void {
    const blocks = this.#blocks;
    for (const h of hashes) {
      blocks.delete(h);
      blocks.set(h, true);
    }
    while (blocks.size > this.#maxBlocks) {
      const oldest = blocks.keys().next().value;
      if (oldest === undefined) break;
      blocks.delete(oldest);
    }
  }
}
