import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';

import type { ByteRange } from './range.js';

/**
 * One blob being fetched from upstream into the mirror: how much of it is on disk (the
 * contiguous prefix of `part`), and a way to wait for more. Readers tail `part` as it grows,
 * so the first agent is served while the bytes are still arriving.
 */
export class Fill {
  readonly size: number;
  /** Where the bytes arrive (the blob's `.incomplete` file) and where they end (the blob). */
  readonly part: string;
  readonly blob: string;
  readonly abort = new AbortController();
  /** Settles when the fetch has ended, either way (purge waits for it before removing files). */
  settled: Promise<void> = Promise.resolve();
  #done = 0;
  #generation = 0;
  #state: 'running' | 'complete' | 'failed' = 'running';
  #error: Error | undefined;
  #waiters: (() => void)[] = [];

  constructor(o: { size: number; part: string; blob: string }) {
    this.size = o.size;
    this.part = o.part;
    this.blob = o.blob;
  }

  get done(): number {
    return this.#state === 'complete' ? this.size : this.#done;
  }
  get state(): 'running' | 'complete' | 'failed' {
    return this.#state;
  }
  get error(): Error | undefined {
    return this.#error;
  }
  /**
   * Bytes readers may be given: all that is on disk but the file's last byte, which waits for the
   * digest's check (made as bytes arrive, so no wait to speak of). A client given every byte has
   * the file as it should be; one whose file does not match is cut off before its end.
   */
  get servable(): number {
    return this.#state === 'complete' ? this.size : Math.min(this.#done, this.size - 1);
  }
  /** Changes when the fetch starts over from fewer bytes (a digest mismatch refetched): bytes read before may differ. */
  get generation(): number {
    return this.#generation;
  }

  progress(bytes: number): void {
    if (bytes < this.#done) this.#generation++;
    this.#done = bytes;
    this.#notify();
  }

  complete(): void {
    this.#state = 'complete';
    this.#notify();
  }

  fail(error: Error): void {
    this.#state = 'failed';
    this.#error = error;
    this.#notify();
  }

  /** Resolves at the next progress, or at once when the fetch has ended. */
  changed(): Promise<void> {
    if (this.#state !== 'running') return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Resolves once byte `start` may be served (or the fetch is complete); rejects when the fetch failed first. */
  async ready(start: number): Promise<void> {
    for (;;) {
      if (this.#state === 'failed') throw this.#error ?? new Error('the fetch failed');
      if (this.#state === 'complete' || this.servable > start) return;
      await this.changed();
    }
  }

  #notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}

const chunkBytes = 1 << 20;

/** Bytes `range` of a fill's file, read as they arrive; ends with an error when the fetch fails. */
export class TailReader extends Readable {
  readonly #fill: Fill;
  readonly #end: number;
  #pos: number;
  #file: FileHandle | undefined;
  #generation = 0;

  constructor(fill: Fill, range: ByteRange) {
    super({ highWaterMark: chunkBytes });
    this.#fill = fill;
    this.#pos = range.start;
    this.#end = range.end;
  }

  override _read(): void {
    this.#next().then(
      (chunk) => {
        if (!this.destroyed) this.push(chunk);
      },
      (e: unknown) => this.destroy(e as Error),
    );
  }

  /** The next chunk, once it is on disk; null past the range's end. */
  async #next(): Promise<Buffer | null> {
    const fill = this.#fill;
    for (;;) {
      if (this.#pos > this.#end) return null;
      if (this.destroyed) return null;
      const file = this.#file ?? (await this.#open());
      if (file === undefined) {
        await fill.changed();
        continue;
      }
      if (fill.generation !== this.#generation) {
        throw new Error(
          'the mirror started this file over (its first copy did not match its digest): ask again',
        );
      }
      const available = Math.min(fill.servable, this.#end + 1) - this.#pos;
      if (available > 0) {
        const buffer = Buffer.allocUnsafe(Math.min(available, chunkBytes));
        const { bytesRead } = await file.read(buffer, 0, buffer.length, this.#pos);
        if (bytesRead > 0) {
          this.#pos += bytesRead;
          return buffer.subarray(0, bytesRead);
        }
      }
      if (fill.state === 'failed') throw fill.error ?? new Error('the fetch failed');
      if (fill.state === 'complete' && available <= 0) {
        throw new Error(`the mirror's copy ended at byte ${this.#pos} of ${fill.size}`);
      }
      await fill.changed();
    }
  }

  /** The bytes so far, or the blob once they were moved there; undefined while neither is there. */
  async #open(): Promise<FileHandle | undefined> {
    const generation = this.#fill.generation;
    for (const path of [this.#fill.part, this.#fill.blob]) {
      try {
        const file = await open(path, 'r');
        if (this.destroyed) {
          await file.close();
          return undefined;
        }
        this.#file = file;
        this.#generation = generation;
        return file;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      }
    }
    if (this.#fill.state === 'failed') throw this.#fill.error ?? new Error('the fetch failed');
    return undefined;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const file = this.#file;
    this.#file = undefined;
    if (file === undefined) {
      callback(error);
      return;
    }
    file.close().then(
      () => callback(error),
      () => callback(error),
    );
  }
}
