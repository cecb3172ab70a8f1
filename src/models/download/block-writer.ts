import type { FileHandle } from 'node:fs/promises';

const MB = 1024 * 1024;
/** The size of one write: large enough that the disk never waits on a tiny write per network chunk. */
export const blockBytes = 1 * MB;
/** A block is written at least this often on a slow link, so progress (and a mirror's reader) moves. */
const flushEveryMs = 250;

/**
 * Gathers received chunks into blocks of about 1 MiB written at increasing offsets, in order,
 * one block gathering while the last is written; `written` is told the offset each block ends
 * at once it is on disk. The chunks are written as they are (one vectored write per block, no
 * copy: they are fresh buffers no one reuses). A block is also written after a quiet moment, so
 * progress (and a mirror's reader) moves on a slow or paused link.
 */
export class BlockWriter {
  readonly #fh: FileHandle;
  #pieces: Uint8Array[] = [];
  #fill = 0;
  #at: number;
  #lastFlush = Date.now();
  #chain: Promise<void> = Promise.resolve();
  readonly #written: (end: number) => void;
  readonly #timer: NodeJS.Timeout;

  constructor(fh: FileHandle, at: number, written: (end: number) => void) {
    this.#fh = fh;
    this.#at = at;
    this.#written = written;
    this.#timer = setInterval(() => {
      if (this.#fill > 0 && Date.now() - this.#lastFlush >= flushEveryMs)
        void this.flush().catch(() => undefined);
    }, flushEveryMs);
  }

  /**
   * Takes a chunk; returns a promise to wait on only when a block filled (it resolves once the
   * block before it is on disk). Not async: a promise per network chunk costs a tick each, and
   * the chunks that pile up meanwhile live long enough to be collected the slow way.
   */
  add(chunk: Uint8Array): Promise<void> | undefined {
    if (chunk.length === 0) return undefined;
    this.#pieces.push(chunk);
    this.#fill += chunk.length;
    // Many tiny chunks are written before they make a vector longer than the system takes (IOV_MAX).
    return this.#fill >= blockBytes || this.#pieces.length >= 1024 ? this.flush() : undefined;
  }

  /** Queues the gathered block for writing after those before it; resolves when those are written. */
  flush(): Promise<void> {
    const before = this.#chain;
    this.#lastFlush = Date.now();
    if (this.#fill === 0) return before;
    let pieces = this.#pieces;
    const length = this.#fill;
    const at = this.#at;
    this.#pieces = [];
    this.#fill = 0;
    this.#at += length;
    this.#chain = before.then(async () => {
      let written = 0;
      while (written < length) {
        const r = await this.#fh.writev(pieces, at + written);
        written += r.bytesWritten;
        if (written < length) pieces = unwritten(pieces, r.bytesWritten);
      }
      this.#written(at + length);
    });
    // A failed write fails every later one in the chain, and surfaces at close.
    this.#chain.catch(() => undefined);
    return before;
  }

  /** Writes what is left and waits for all of it. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    void this.flush();
    await this.#chain;
  }
}

/** What of `pieces` a short vectored write of `done` bytes left (exported for its test). */
export function unwritten(pieces: Uint8Array[], done: number): Uint8Array[] {
  let skip = done;
  let i = 0;
  while (i < pieces.length && skip >= (pieces[i]?.length ?? 0)) skip -= pieces[i++]?.length ?? 0;
  const rest = pieces.slice(i);
  const first = rest[0];
  if (first !== undefined && skip > 0) rest[0] = first.subarray(skip);
  return rest;
}
