import { createWriteStream, fstatSync, openSync, renameSync, type WriteStream } from 'node:fs';
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
  /** Appended to; absent: memory only. */
  file?: string;
  /** The file is moved to `FILE.1` (replacing the previous one) when it grows past this. */
  maxFileBytes: number;
}

/**
 * One shard's output: the last lines in memory (for `logs` and exit reports), the whole
 * of it in a file rotated at a size, and live followers.
 */
export class LogBuffer {
  readonly #ring: string[] = [];
  readonly #capacity: number;
  /** Lines pushed since the buffer was made; the ring holds the last `capacity` of them. */
  #total = 0;
  readonly #followers = new Set<(line: string) => void>();
  readonly #file: string | undefined;
  readonly #maxFileBytes: number;
  #stream: WriteStream | undefined;
  #fileBytes = 0;

  constructor(options: LogBufferOptions) {
    this.#capacity = Math.max(1, options.lines);
    this.#file = options.file;
    this.#maxFileBytes = options.maxFileBytes;
    if (this.#file !== undefined) this.#open(this.#file);
  }

  /** Lines pushed so far, to ask later for only the lines since then. */
  get total(): number {
    return this.#total;
  }

  push(line: string): void {
    this.#ring[this.#total % this.#capacity] = line;
    this.#total++;
    this.#write(`${line}\n`);
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
    this.#write(`--- llmgw ${new Date().toISOString()}: ${text}\n`);
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

  close(): void {
    this.#followers.clear();
    this.#stream?.end();
    this.#stream = undefined;
  }

  #open(file: string): void {
    let fd: number;
    try {
      // Opened synchronously so a rotation's rename can never race the open.
      fd = openSync(file, 'a');
      this.#fileBytes = fstatSync(fd).size;
    } catch {
      this.#stream = undefined;
      return;
    }
    const stream = createWriteStream('', { fd });
    // A full disk stops the file, never the engine or its in-memory log (the stream closes its fd).
    stream.on('error', () => {
      if (this.#stream === stream) this.#stream = undefined;
    });
    this.#stream = stream;
  }

  #write(text: string): void {
    if (this.#stream === undefined || this.#file === undefined) return;
    this.#stream.write(text);
    this.#fileBytes += Buffer.byteLength(text);
    if (this.#fileBytes < this.#maxFileBytes) return;
    this.#stream.end();
    try {
      renameSync(this.#file, `${this.#file}.1`);
    } catch {
      // Keep appending to the same file rather than lose lines.
    }
    this.#open(this.#file);
  }
}
