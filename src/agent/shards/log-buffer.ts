import { appendFileSync, closeSync, copyFileSync, openSync, readSync, statSync, truncateSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

/** A line longer than this is cut into pieces: a progress bar redrawn with `\r` never ends one. */
const MAX_LINE_CHARS = 64 * 1024;

/** Turns chunks of a byte stream into lines (without their `\n`), UTF-8 split across chunks included. */
export class LineSplitter {
  readonly #decoder = new StringDecoder('utf8');
  readonly #onLine: (line: string) => void;
  #partial = '';

  constructor(onLine: (line: string) => void) {
    this.#onLine = onLine;
  }

  push(chunk: Buffer): void {
    const text = this.#partial + this.#decoder.write(chunk);
    const lines = text.split('\n');
    this.#partial = lines.pop() ?? '';
    for (const line of lines) this.#onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
    while (this.#partial.length > MAX_LINE_CHARS) {
      this.#onLine(this.#partial.slice(0, MAX_LINE_CHARS));
      this.#partial = this.#partial.slice(MAX_LINE_CHARS);
    }
  }

  /** Emits what is left once the stream has ended. */
  flush(): void {
    const rest = this.#partial + this.#decoder.end();
    this.#partial = '';
    if (rest !== '') this.#onLine(rest);
  }
}

export interface LogBufferOptions {
  /** How many lines to keep in memory. */
  lines: number;
  /**
   * The shard's log file: engines write their stdout and stderr to it themselves (so their
   * output outlives an agent that restarts), the supervisor adds its notes, and this reads
   * it back for the lines in memory. Absent: memory only.
   */
  file?: string;
  /** The file is copied to `FILE.1` (replacing the previous one) and emptied when it grows past this. */
  maxFileBytes: number;
  /** How often the file is read for new lines once watched (default 100 ms). */
  pollMs?: number;
}

/** How the supervisor's own lines start in a log file; they are not the engine's, so they stay out of memory. */
export const notePrefix = '--- llmgw ';

/** How much of a file's end is read for an adopted engine's recent lines. */
const RECENT_BYTES = 256 * 1024;

/**
 * One shard's output: the last lines in memory (for `logs` and exit reports), the whole
 * of it in a file rotated at a size, and live followers.
 *
 * The engines write the file directly (their stdout and stderr are the file, opened for
 * appending), not through pipes to the agent: a pipe dies with the agent, and an engine
 * writing to it would then be killed by SIGPIPE. The file is read back here as it grows.
 */
export class LogBuffer {
  readonly #ring: string[] = [];
  readonly #capacity: number;
  /** Lines pushed since the buffer was made; the ring holds the last `capacity` of them. */
  #total = 0;
  readonly #followers = new Set<(line: string) => void>();
  readonly #file: string | undefined;
  readonly #maxFileBytes: number;
  readonly #pollMs: number;
  /** How far the file has been read. */
  #offset = 0;
  readonly #splitter: LineSplitter;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: LogBufferOptions) {
    this.#capacity = Math.max(1, options.lines);
    this.#file = options.file;
    this.#maxFileBytes = options.maxFileBytes;
    this.#pollMs = options.pollMs ?? 100;
    this.#splitter = new LineSplitter((line) => {
      if (!line.startsWith(notePrefix)) this.push(line);
    });
    // What is in the file already is an earlier run's: only what comes next is read.
    if (this.#file !== undefined) this.#offset = sizeOf(this.#file) ?? 0;
  }

  /** The file engines write to; undefined for a buffer in memory only. */
  get file(): string | undefined {
    return this.#file;
  }

  /** Lines pushed so far, to ask later for only the lines since then. */
  get total(): number {
    return this.#total;
  }

  push(line: string): void {
    this.#ring[this.#total % this.#capacity] = line;
    this.#total++;
    for (const listener of this.#followers) {
      try {
        listener(line);
      } catch {
        // A follower's failure (a closed socket) is its own business, not the engine's.
      }
    }
  }

  /** A line of the supervisor's own (a start, an exit) into the file only, so the engine's lines stay its own. */
  note(text: string): void {
    if (this.#file === undefined) return;
    try {
      // On a line of its own, even after an engine's line not ended yet.
      const start = endsLine(this.#file) ? '' : '\n';
      appendFileSync(this.#file, `${start}${notePrefix}${new Date().toISOString()}: ${text}\n`);
    } catch {
      // A full disk loses the note, never the engine.
    }
  }

  /** Reads the file as engines write it, every pollMs, until close(). */
  watch(): void {
    if (this.#file === undefined || this.#timer !== undefined) return;
    this.#timer = setInterval(() => {
      this.readNow();
    }, this.#pollMs);
    this.#timer.unref();
  }

  /**
   * Takes the last lines already in the file into memory: the recent output of an engine
   * an earlier agent started, for `logs` right after it is adopted.
   */
  loadRecent(): void {
    const file = this.#file;
    if (file === undefined) return;
    const size = sizeOf(file);
    if (size === undefined || size === 0) return;
    const from = Math.max(0, size - RECENT_BYTES);
    const text = readRange(file, from, size);
    if (text === undefined) return;
    const lines = text.split('\n');
    // The first piece is a line cut in two when not read from the start; the last, one not ended yet.
    if (from > 0) lines.shift();
    const partial = lines.pop() ?? '';
    for (const line of lines) if (!line.startsWith(notePrefix)) this.push(line.replace(/\r$/, ''));
    this.#offset = size - Buffer.byteLength(partial);
  }

  /**
   * Reads what was written since the last read. `ended`: the writers are gone, so a last
   * line without its newline is complete.
   */
  readNow(ended = false): void {
    const file = this.#file;
    if (file === undefined) return;
    const size = sizeOf(file);
    if (size !== undefined) {
      // Emptied by someone else (logrotate's copytruncate): start over from its beginning.
      if (size < this.#offset) this.#offset = 0;
      if (size > this.#offset) {
        const data = readBytes(file, this.#offset, size);
        if (data !== undefined) {
          this.#offset = size;
          this.#splitter.push(data);
        }
      }
      if (size >= this.#maxFileBytes) this.#rotate(file);
    }
    if (ended) this.#splitter.flush();
  }

  /** The last `n` lines (all kept when absent), counting only lines pushed after `since` when given. */
  tail(n?: number, since = 0): string[] {
    const first = Math.max(since, this.#total - this.#capacity, n === undefined ? 0 : this.#total - n);
    const out: string[] = [];
    for (let i = first; i < this.#total; i++) out.push(this.#ring[i % this.#capacity] ?? '');
    return out;
  }

  follow(listener: (line: string) => void): () => void {
    const wrapped = (line: string): void => {
      listener(line);
    };
    this.#followers.add(wrapped);
    return () => {
      this.#followers.delete(wrapped);
    };
  }

  /** Stops reading the file and feeding followers; the file itself is left as it is. */
  close(): void {
    this.#followers.clear();
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Copies the file to FILE.1 and empties it. Not a rename: the engines hold the file open
   * for appending and would go on writing the renamed one. What they write between the copy
   * and the truncation is lost, a few lines at most.
   */
  #rotate(file: string): void {
    try {
      copyFileSync(file, `${file}.1`);
      truncateSync(file, 0);
      this.#offset = 0;
    } catch {
      // Keep appending to the same file rather than lose lines.
    }
  }
}

/** Whether the file is empty or absent, or its last byte ends a line. */
function endsLine(file: string): boolean {
  const size = sizeOf(file);
  if (size === undefined || size === 0) return true;
  return readBytes(file, size - 1, size)?.[0] === 0x0a;
}

function sizeOf(file: string): number | undefined {
  try {
    return statSync(file).size;
  } catch {
    return undefined;
  }
}

function readBytes(file: string, from: number, to: number): Buffer | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const buffer = Buffer.alloc(to - from);
    const n = readSync(fd, buffer, 0, buffer.length, from);
    return buffer.subarray(0, n);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function readRange(file: string, from: number, to: number): string | undefined {
  return readBytes(file, from, to)?.toString('utf8');
}
