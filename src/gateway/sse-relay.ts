import { scanUsage, type TokenCounts } from './usage-scan.js';

/**
 * Passes a server-sent event stream through, event by event as they complete, noting
 * when the first token and each later one arrived and the usage the last event carries.
 * When the gateway asked for usage on the client's behalf, it drops the usage-only event
 * (`"choices": []`) the client did not ask for; everything else goes through unchanged.
 */
export class SseRelay {
  #buffer = '';
  #tail = '';
  #firstTokenAt: number | undefined;
  #lastTokenAt: number | undefined;
  usage: TokenCounts | undefined;
  readonly #strip: boolean;
  readonly #onToken: (gapMs: number | undefined) => void;
  readonly #now: () => number;

  constructor(options: { stripUsage: boolean; onToken: (gapMs: number | undefined) => void; now?: () => number }) {
    this.#strip = options.stripUsage;
    this.#onToken = options.onToken;
    this.#now = options.now ?? performance.now.bind(performance);
  }

  get firstTokenAt(): number | undefined {
    return this.#firstTokenAt;
  }

  /** The part of `chunk` to send on now: whole events only when stripping, else the chunk itself. */
  push(chunk: string): string {
    if (!this.#strip) {
      this.#observe(chunk);
      // Usage comes last and may straddle chunks: keep the end of the stream to read it at the end.
      this.#tail = (this.#tail + chunk).slice(-4096);
      return chunk;
    }
    this.#buffer += chunk;
    let out = '';
    for (;;) {
      const end = this.#buffer.indexOf('\n\n');
      if (end < 0) break;
      const event = this.#buffer.slice(0, end + 2);
      this.#buffer = this.#buffer.slice(end + 2);
      this.#observe(event);
      if (isUsageOnly(event)) continue;
      out += event;
    }
    return out;
  }

  /** What is left when the stream ends (an unterminated last event). */
  end(): string {
    if (!this.#strip) {
      this.usage = scanUsage(this.#tail) ?? this.usage;
      return '';
    }
    const rest = this.#buffer;
    this.#buffer = '';
    if (rest !== '') this.#observe(rest);
    return isUsageOnly(rest) ? '' : rest;
  }

  #observe(text: string): void {
    // A token is any event with content or text in it; the role-only first chunk is not one.
    if (text.includes('"content":"') || text.includes('"text":"') || text.includes('"delta":"')) {
      const now = this.#now();
      this.#onToken(this.#lastTokenAt === undefined ? undefined : now - this.#lastTokenAt);
      this.#firstTokenAt ??= now;
      this.#lastTokenAt = now;
    }
    if (this.#strip && text.includes('"usage"')) this.usage = scanUsage(text) ?? this.usage;
  }
}

function isUsageOnly(event: string): boolean {
  return event.includes('"choices":[]') && event.includes('"usage"');
}
