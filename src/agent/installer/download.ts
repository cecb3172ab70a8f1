import { rm } from 'node:fs/promises';

import { LlmgwError, messageOf } from '../../core/errors.js';
import { redact, redactUrl } from '../../core/redact.js';
import { incompletePath } from '../../models/cache-layout.js';
import { fetchFile, type Failure, type Wording } from '../../models/download.js';

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
 * Fetches `source` into `file` through models/download.ts's fetchFile, hashing it on the way, so
 * a multi-hundred-megabyte CUDA build never sits in memory. One try, no resume: an install that
 * fails says why, and whoever asked for it tries again. The caller removes `file` when this
 * throws; what had arrived (file.incomplete) is removed here.
 */
export async function download(
  source: Source,
  file: string,
  options: DownloadOptions,
): Promise<{ sha256: string; bytes: number }> {
  let last: { at: number; received: number; total: number | undefined } | undefined;
  const report = (received: number, total: number | undefined) => {
    last = { at: Date.now(), received, total };
    options.onProgress?.(received, total);
  };
  const { url, headers } = withoutCredentials(source.url);
  try {
    const got = await fetchFile({
      url,
      ...(headers === undefined ? {} : { headers }),
      dest: file,
      name: redactUrl(source.url),
      digest: { algorithm: 'sha256' },
      connections: 1,
      retries: 0,
      stallMs: options.stallMs,
      fetch: options.fetch,
      wording: archiveWording(source),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      onProgress: (received, total) => {
        if (
          last === undefined ||
          Date.now() - last.at >= PROGRESS_MS ||
          (total !== undefined && received - last.received >= total * PROGRESS_SHARE)
        )
          report(received, total);
      },
    });
    if (last?.received !== got.bytes) report(got.bytes, last?.total);
    return { sha256: got.hex ?? '', bytes: got.bytes };
  } catch (e) {
    await rm(incompletePath(file), { force: true });
    throw e;
  }
}

/**
 * The SHA-256 published beside a file as `<url>.sha256` (the hex digest, optionally
 * followed by the file name, as sha256sum writes it), or undefined when there is none.
 * Any 4xx counts as none: S3-style mirrors answer 403 for a missing key.
 */
export async function publishedSha256(source: Source, options: FetchOptions): Promise<string | undefined> {
  const sums: Source = { ...source, url: `${source.url}.sha256` };
  const signal = within(options);
  const res = await request(sums, 'GET', options.fetch, signal);
  if (res.status >= 400 && res.status < 500) {
    await res.body?.cancel();
    return undefined;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw statusError(sums, res.status);
  }
  const text = await res.text().catch((e: unknown) => {
    // The caller's own cancellation is not a broken download.
    if (options.signal?.aborted === true) throw e;
    throw new LlmgwError(
      'unavailable',
      `the download of ${redactUrl(sums.url)} broke off: ${causeOf(e)}: try again, or ${sums.unreachable}`,
      { cause: e },
    );
  });
  const digest = /^\s*([0-9a-fA-F]{64})(\s|$)/.exec(text)?.[1];
  if (digest === undefined) {
    throw new LlmgwError(
      'unavailable',
      `${redactUrl(sums.url)} does not hold a SHA-256 digest (it starts "${text.slice(0, 40).trim()}"): fix the file on the mirror, or pin the digest with the sha256 option`,
    );
  }
  return digest.toLowerCase();
}

/** Whether the address answers 2xx to a HEAD: for telling a missing asset from an old build's. */
export async function exists(url: string, options: FetchOptions): Promise<boolean> {
  try {
    const res = await request({ url, notFound: '', unreachable: '' }, 'HEAD', options.fetch, within(options));
    return res.ok;
  } catch {
    return false;
  }
}

/** A small request's signal: the caller's, and a time limit of stallMs (a few bytes arrive at once or not at all). */
function within(options: FetchOptions): AbortSignal {
  const limit = AbortSignal.timeout(options.stallMs);
  return options.signal === undefined ? limit : AbortSignal.any([options.signal, limit]);
}

/** fetch refuses a URL with credentials; a mirror behind basic auth gets them as a header. */
function withoutCredentials(address: string): { url: string; headers: Record<string, string> | undefined } {
  const url = new URL(address);
  if (url.username === '' && url.password === '') return { url: url.toString(), headers: undefined };
  const user = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  url.username = '';
  url.password = '';
  return { url: url.toString(), headers: { authorization: `Basic ${Buffer.from(user).toString('base64')}` } };
}

async function request(
  source: Source,
  method: string,
  fetchImpl: typeof fetch,
  signal: AbortSignal,
): Promise<Response> {
  const { url, headers } = withoutCredentials(source.url);
  try {
    // identity: a mirror that marks .tar.gz as Content-Encoding gzip would otherwise have
    // fetch unzip it, and the bytes would no longer match their published digest.
    return await fetchImpl(url, {
      method,
      redirect: 'follow',
      headers: { 'accept-encoding': 'identity', ...headers },
      signal,
    });
  } catch (e) {
    if (signal.aborted && !(signal.reason instanceof DOMException && signal.reason.name === 'TimeoutError'))
      throw e;
    throw new LlmgwError(
      'unavailable',
      `could not download ${redactUrl(source.url)}: ${causeOf(e)}: ${source.unreachable}`,
      { cause: e },
    );
  }
}

/** An archive's download, said with the setting the operator changes. */
function archiveWording(source: Source): Wording {
  const url = redactUrl(source.url);
  const retry = `try again, or ${source.unreachable}`;
  const said = (f: Failure): string => {
    switch (f.kind) {
      case 'unreachable':
        return `could not download ${url}: ${causeOf(f.cause)}: ${source.unreachable}`;
      case 'status':
        return statusError(source, f.status).message;
      case 'stalled':
        return `the download of ${url} broke off: nothing arrived for ${f.ms / 1000} s: ${retry}`;
      case 'broke':
        return `the download of ${url} broke off: ${causeOf(f.cause)}: ${retry}`;
      case 'short':
        return `the download of ${url} ended after ${f.received} of ${f.want} bytes: ${retry}`;
    }
  };
  return {
    failure: said,
    gaveUp: (words, _tries, cause) => new LlmgwError('unavailable', words, { cause }),
    refused: (res) => statusError(source, res.status),
  };
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

/** fetch says only "fetch failed"; the reason (ECONNREFUSED, ENOTFOUND, a timeout) is its cause. */
function causeOf(e: unknown): string {
  if (e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError'))
    return 'no answer in time';
  if (e instanceof Error && e.cause !== undefined) {
    const cause = e.cause;
    const code =
      typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : undefined;
    return redact(code === undefined ? messageOf(cause) : `${code} (${messageOf(cause)})`);
  }
  // llmgw's own HTTP client gives the socket's error itself.
  const code = e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
  return redact(code === undefined ? messageOf(e) : `${code} (${messageOf(e)})`);
}
