import { scanUsage, type TokenCounts } from './usage-scan.js';

const eventEnd = Buffer.from('\n\n');
const usageMark = Buffer.from('"usage"');
const emptyChoices = Buffer.from('"choices":[]');
// A token is an event with content or text in it; the role-only first chunk is not one.
const tokenMarks = [Buffer.from('"content":"'), Buffer.from('"text":"'), Buffer.from('"delta":"')];

/**
 * Passes a server-sent event stream through as bytes, chunk by chunk, noting when the
 * first token and each later one arrived and the usage the last event carries. When the
 * gateway asked for usage on the client's behalf, it drops the usage-only event
 * (`"choices": []`) the client did not ask for — only then are events put back together
 * across chunks and looked at as text; everything else goes through as it came.
 */
export class SseRelay {
  #pending: Buffer | undefined;
  #tail: Buffer | undefined;
  #firstTokenAt: number | undefined;
  #lastTokenAt: number | undefined;
  usage: TokenCounts | undefined;
  readonly #strip: boolean;
  readonly #onToken: (gapMs: number | undefined) => void;
  readonly #now: () => number;

  constructor(options: {
    stripUsage: boolean;
    onToken: (gapMs: number | undefined) => void;
    now?: () => number;
  }) {
    this.#strip = options.stripUsage;
    this.#onToken = options.onToken;
    this.#now = options.now ?? performance.now.bind(performance);
  }

  get firstTokenAt(): number | undefined {
    return this.#firstTokenAt;
  }

  /** What to send on now (possibly nothing, while an event is incomplete and usage is being stripped). */
  push(chunk: Buffer): Buffer | undefined {
    this.#observe(chunk);
    if (!this.#strip) {
      // Usage comes last and may straddle chunks: keep the end of the stream to read it at the end.
      this.#tail =
        this.#tail === undefined || this.#tail.length + chunk.length > 8192
          ? chunk.subarray(-4096)
          : Buffer.concat([this.#tail, chunk]);
      return chunk;
    }
    const data = this.#pending === undefined ? chunk : Buffer.concat([this.#pending, chunk]);
    const last = data.lastIndexOf(eventEnd);
    if (last < 0) {
      this.#pending = data;
      return undefined;
    }
    const complete = data.subarray(0, last + 2);
    this.#pending = last + 2 < data.length ? data.subarray(last + 2) : undefined;
    if (complete.indexOf(usageMark) < 0) return complete;
    return this.#dropUsageOnly(complete);
  }

  /** What is left when the stream ends (an unterminated last event). */
  end(): Buffer | undefined {
    if (!this.#strip) {
      if (this.#tail !== undefined) this.usage = scanUsage(this.#tail.toString('utf8')) ?? this.usage;
      return undefined;
    }
    const rest = this.#pending;
    this.#pending = undefined;
    if (rest === undefined) return undefined;
    return rest.indexOf(usageMark) < 0 ? rest : this.#dropUsageOnly(rest);
  }

  #dropUsageOnly(bytes: Buffer): Buffer {
    const text = bytes.toString('utf8');
    this.usage = scanUsage(text) ?? this.usage;
    if (bytes.indexOf(emptyChoices) < 0) return bytes;
    const kept = text
      .split('\n\n')
      .filter((event) => !(event.includes('"choices":[]') && event.includes('"usage"')))
      .join('\n\n');
    return Buffer.from(kept);
  }

  #observe(chunk: Buffer): void {
    if (!tokenMarks.some((m) => chunk.indexOf(m) >= 0)) return;
    const now = this.#now();
    this.#onToken(this.#lastTokenAt === undefined ? undefined : now - this.#lastTokenAt);
    this.#firstTokenAt ??= now;
    this.#lastTokenAt = now;
  }
}
