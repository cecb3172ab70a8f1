import { LlmgwError, messageOf } from '../core/errors.js';

import { apiStatus } from './errors.js';

/**
 * What went wrong with an informer's list or watch, and the log of it: once when a kind of failure
 * starts (a retry loop that meets the same failure says nothing more), once when it works again.
 * Pure: table-tested in watch-health.test.ts.
 */

/** The least of a logger the informers need (pino's Logger is one). */
export interface WatchLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * A watch still open past the timeout llmgw asked the server for, plus a margin: the server would
 * have ended it, so its connection is taken as dead (a peer gone without a FIN or RST).
 */
export class SilentWatchError extends Error {
  constructor(o: { timeoutSeconds: number; waitedSeconds: number }) {
    super(
      `the watch was still open after ${o.waitedSeconds} s though the server was asked to end it after ${o.timeoutSeconds} s: its connection is taken as dead`,
    );
  }
}

/** A watch the API answered with another status than 200, or ended with an ERROR event (a Status). */
export class WatchStatusError extends Error {
  readonly code: number;
  readonly body: string;
  constructor(code: number, body: string) {
    super(`HTTP ${code}`);
    this.code = code;
    this.body = body;
  }
}

export interface WatchFailure {
  /** Same kind, same log line: `http 500`, `silent`, `ECONNRESET`, `list unavailable`. */
  kind: string;
  message: string;
  /** 410 Gone: the resourceVersion is too old; a list starts again from now (expected, not logged). */
  gone: boolean;
}

export function classifyWatchFailure(e: unknown): WatchFailure {
  if (e instanceof SilentWatchError) return { kind: 'silent', message: e.message, gone: false };
  if (e instanceof LlmgwError) return { kind: `list ${e.code}`, message: e.message, gone: false };
  const status = e instanceof WatchStatusError ? apiStatus(e) : undefined;
  if (status !== undefined)
    return {
      kind: `http ${status.code}`,
      message: `the API server answered ${status.code}: ${status.message}`,
      gone: status.code === 410,
    };
  const code =
    typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : 'error';
  return { kind: code, message: `the connection failed: ${messageOf(e)}`, gone: false };
}

/** The log of one informer's failures: what changed, not each retry. */
export class WatchHealth {
  readonly #resource: string;
  readonly #log: WatchLogger;
  readonly #retryMs: number;
  #failing: string | undefined;
  #tries = 0;

  constructor(o: { resource: string; log: WatchLogger; retryMs: number }) {
    this.#resource = o.resource;
    this.#log = o.log;
    this.#retryMs = o.retryMs;
  }

  failed(f: WatchFailure): void {
    this.#tries++;
    if (f.kind === this.#failing) return;
    this.#failing = f.kind;
    this.#log.warn(
      { resource: this.#resource, kind: f.kind },
      `watching ${this.#resource} failed: ${f.message}; llmgw lists and watches again every ${this.#retryMs / 1000} s until it works`,
    );
  }

  /** The watch delivers again (an event, a bookmark, or the server's end of it). */
  working(): void {
    if (this.#failing === undefined) return;
    this.#log.info(
      { resource: this.#resource, failures: this.#tries },
      `watching ${this.#resource} works again (after ${this.#tries} failed ${this.#tries === 1 ? 'try' : 'tries'})`,
    );
    this.#failing = undefined;
    this.#tries = 0;
  }
}
