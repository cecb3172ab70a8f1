import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { ReadableStreamDefaultReader } from 'node:stream/web';

import { LlmgwError, messageOf } from '../../core/errors.js';
import { redact, redactUrl } from '../../core/redact.js';

/** Where a file comes from, and what the operator changes when that address fails. */
export interface Source {
  url: string;
  /** Said after a 404: which setting names a wrong build or archive. */
  notFound: string;
  /** Said when the address cannot be reached: which setting points elsewhere. */
  unreachable: string;
}

export interface FetchOptions {
  fetch: typeof fetch;
  /** Give up when no byte has arrived for this long. */
  stallMs: number;
  signal?: AbortSignal | undefined;
}

export interface DownloadOptions extends FetchOptions {
  /** Called at most every 250 ms or 5% of the file, and once at each end. */
  onProgress?: ((received: number, total: number | undefined) => void) | undefined;
}

const PROGRESS_MS = 250;
const PROGRESS_SHARE = 0.05;

/**
 * Streams `source` into `file` (created, never overwritten) and hashes it on the way,
 * so a multi-hundred-megabyte CUDA build never sits in memory. The caller removes the
 * file when this throws.
 */
export async function download(
  source: Source,
  file: string,
  options: DownloadOptions,
): Promise<{ sha256: string; bytes: number }> {
  const stall = new Stall(options.stallMs);
  try {
    const res = await request(source, 'GET', { ...options, signal: stall.signal(options.signal) });
    if (!res.ok) {
      // Unread, the error page would hold its connection until garbage collection.
      await res.body?.cancel();
      throw statusError(source, res.status);
    }
    const header = res.headers.get('content-length');
    const total = header === null || !/^\d+$/.test(header) ? undefined : Number(header);
    const body = res.body;
    if (body === null) {
      throw new LlmgwError(
        'unavailable',
        `${redactUrl(source.url)} answered ${res.status} with no body: ${source.unreachable}`,
      );
    }

    const hash = createHash('sha256');
    const out = await open(file, 'wx');
    let received = 0;
    let lastAt = Date.now();
    let lastReceived = 0;
    options.onProgress?.(0, total);
    // Typed by hand: fetch's body is a ReadableStream<any> in @types/node.
    const reader = body.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    let finished = false;
    try {
      for (;;) {
        const { done, value } = await reader.read().catch((e: unknown) => {
          throw readError(source, e, stall, options.signal);
        });
        if (done) {
          finished = true;
          break;
        }
        stall.touch();
        hash.update(value);
        await out.write(value);
        received += value.byteLength;
        const now = Date.now();
        if (
          now - lastAt >= PROGRESS_MS ||
          (total !== undefined && received - lastReceived >= total * PROGRESS_SHARE)
        ) {
          lastAt = now;
          lastReceived = received;
          options.onProgress?.(received, total);
        }
      }
    } finally {
      // A failed write leaves the response open; cancelling frees its connection.
      if (!finished) await reader.cancel().catch(() => undefined);
      await out.close();
    }
    if (total !== undefined && received !== total) {
      throw new LlmgwError(
        'unavailable',
        `the download of ${redactUrl(source.url)} ended after ${received} of ${total} bytes: try again, or ${source.unreachable}`,
      );
    }
    if (lastReceived !== received) options.onProgress?.(received, total);
    return { sha256: hash.digest('hex'), bytes: received };
  } finally {
    stall.stop();
  }
}

/**
 * The SHA-256 published beside a file as `<url>.sha256` (the hex digest, optionally
 * followed by the file name, as sha256sum writes it), or undefined when there is none.
 * Any 4xx counts as none: S3-style mirrors answer 403 for a missing key.
 */
export async function publishedSha256(source: Source, options: FetchOptions): Promise<string | undefined> {
  const sums: Source = { ...source, url: `${source.url}.sha256` };
  const stall = new Stall(options.stallMs);
  try {
    const res = await request(sums, 'GET', { ...options, signal: stall.signal(options.signal) });
    if (res.status >= 400 && res.status < 500) {
      await res.body?.cancel();
      return undefined;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw statusError(sums, res.status);
    }
    const text = await res.text().catch((e: unknown) => {
      throw readError(sums, e, stall, options.signal);
    });
    const digest = /^\s*([0-9a-fA-F]{64})(\s|$)/.exec(text)?.[1];
    if (digest === undefined) {
      throw new LlmgwError(
        'unavailable',
        `${redactUrl(sums.url)} does not hold a SHA-256 digest (it starts "${text.slice(0, 40).trim()}"): fix the file on the mirror, or pin the digest with the sha256 option`,
      );
    }
    return digest.toLowerCase();
  } finally {
    stall.stop();
  }
}

/** Whether the address answers 2xx to a HEAD: for telling a missing asset from an old build's. */
export async function exists(url: string, options: FetchOptions): Promise<boolean> {
  const stall = new Stall(options.stallMs);
  try {
    const res = await request({ url, notFound: '', unreachable: '' }, 'HEAD', {
      ...options,
      signal: stall.signal(options.signal),
    });
    return res.ok;
  } catch {
    return false;
  } finally {
    stall.stop();
  }
}

async function request(source: Source, method: string, options: FetchOptions): Promise<Response> {
  // identity: a mirror that marks .tar.gz as Content-Encoding gzip would otherwise have
  // fetch unzip it, and the bytes would no longer match their published digest.
  const headers: Record<string, string> = { 'Accept-Encoding': 'identity' };
  const url = new URL(source.url);
  // fetch refuses a URL with credentials; a mirror behind basic auth gets them as a header.
  if (url.username !== '' || url.password !== '') {
    const user = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    headers['Authorization'] = `Basic ${Buffer.from(user).toString('base64')}`;
    url.username = '';
    url.password = '';
  }
  try {
    return await options.fetch(url, { method, redirect: 'follow', headers, signal: options.signal });
  } catch (e) {
    if (options.signal?.aborted === true && !(options.signal.reason instanceof StallError)) throw e;
    throw new LlmgwError(
      'unavailable',
      `could not download ${redactUrl(source.url)}: ${causeOf(e)}: ${source.unreachable}`,
      { cause: e },
    );
  }
}

function statusError(source: Source, status: number): LlmgwError {
  const url = redactUrl(source.url);
  if (status === 404 || status === 410)
    return new LlmgwError('not_found', `${url} answered ${status}: ${source.notFound}`);
  if (status === 401 || status === 403) {
    return new LlmgwError(
      'unavailable',
      `${url} answered ${status}, refusing this node: let the mirror serve it without credentials, or ${source.unreachable}`,
    );
  }
  return new LlmgwError(
    'unavailable',
    `${url} answered ${status}: try again later, or ${source.unreachable}`,
  );
}

function readError(source: Source, e: unknown, stall: Stall, outer: AbortSignal | undefined): unknown {
  // The caller's own cancellation is not a broken download.
  if (outer?.aborted === true) return e;
  const why = stall.fired ? `nothing arrived for ${stall.ms / 1000} s` : causeOf(e);
  return new LlmgwError(
    'unavailable',
    `the download of ${redactUrl(source.url)} broke off: ${why}: try again, or ${source.unreachable}`,
    { cause: e },
  );
}

/** fetch says only "fetch failed"; the reason (ECONNREFUSED, ENOTFOUND, a timeout) is its cause. */
function causeOf(e: unknown): string {
  if ((e instanceof Error && e.name === 'AbortError') || e instanceof StallError) return 'no answer in time';
  if (e instanceof Error && e.cause !== undefined) {
    const cause = e.cause;
    if (cause instanceof StallError) return 'no answer in time';
    const code =
      typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : undefined;
    return redact(code === undefined ? messageOf(cause) : `${code} (${messageOf(cause)})`);
  }
  return redact(messageOf(e));
}

class StallError extends Error {
  constructor(ms: number) {
    super(`nothing arrived for ${ms} ms`);
    this.name = 'StallError';
  }
}

/** Aborts when no progress was made for `ms`: a slow link is fine, a dead one is not. */
class Stall {
  readonly ms: number;
  fired = false;
  #controller = new AbortController();
  #timer: NodeJS.Timeout | undefined;

  constructor(ms: number) {
    this.ms = ms;
    this.touch();
  }

  signal(outer: AbortSignal | undefined): AbortSignal {
    return outer === undefined ? this.#controller.signal : AbortSignal.any([outer, this.#controller.signal]);
  }

  touch(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.fired = true;
      this.#controller.abort(new StallError(this.ms));
    }, this.ms);
  }

  stop(): void {
    clearTimeout(this.#timer);
  }
}
