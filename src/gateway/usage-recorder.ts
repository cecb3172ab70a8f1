import type { Logger } from 'pino';

import type { UsageRow } from '../core/api-types.js';

import type { UsageSink } from './services.js';

export type { UsageRow };

/**
 * Usage per key, model and hour, counted in memory and written in batches, off the
 * request path: a request adds to a map; a timer writes the map. A failed write is kept
 * and tried again (bounded), so a database hiccup loses no count and slows no request.
 */
export class UsageRecorder {
  readonly #pending = new Map<string, UsageRow>();
  readonly #sink: UsageSink;
  readonly #logger: Logger;
  readonly #timer: NodeJS.Timeout;
  #flushing: Promise<void> = Promise.resolve();
  #hourStart = -1;
  #hourName = '';

  constructor(options: { sink: UsageSink; logger: Logger; intervalMs?: number }) {
    this.#sink = options.sink;
    this.#logger = options.logger;
    this.#timer = setInterval(() => void this.flush(), options.intervalMs ?? 1000);
    this.#timer.unref();
  }

  record(r: { key: string; model: string; prompt: number; completion: number; at?: number }): void {
    const { key, model, prompt: promptTokens, completion: completionTokens } = r;
    const at = r.at ?? Date.now();
    const start = at - (at % 3_600_000);
    // The hour's name is made once an hour, not once a request.
    if (start !== this.#hourStart) {
      this.#hourStart = start;
      this.#hourName = new Date(start).toISOString();
    }
    const hour = this.#hourName;
    const id = `${key}\u0000${model}\u0000${hour}`;
    const row = this.#pending.get(id);
    if (row === undefined) {
      this.#pending.set(id, {
        key_name: key,
        model,
        hour,
        requests: 1,
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
      });
    } else {
      row.requests++;
      row.prompt_tokens += promptTokens;
      row.completion_tokens += completionTokens;
    }
  }

  /** Writes what was counted; resolves once it is stored (or kept for the next try). */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      if (this.#pending.size === 0) return;
      const rows = [...this.#pending.values()];
      this.#pending.clear();
      try {
        await this.#sink.write(rows);
      } catch (e) {
        // Put the counts back, merged with any that arrived meanwhile.
        for (const r of rows) this.#restore(r);
        this.#logger.warn(
          { err: e instanceof Error ? e.message : String(e), rows: rows.length },
          'usage not written yet; will retry',
        );
      }
    });
    return this.#flushing;
  }

  #restore(r: UsageRow): void {
    const id = `${r.key_name}\u0000${r.model}\u0000${r.hour}`;
    const row = this.#pending.get(id);
    if (row === undefined) this.#pending.set(id, { ...r });
    else {
      row.requests += r.requests;
      row.prompt_tokens += r.prompt_tokens;
      row.completion_tokens += r.completion_tokens;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }
}
