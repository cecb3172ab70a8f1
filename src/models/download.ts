/**
 * Fetches one file into its blob path: resumable (a partial `.incomplete` survives a restart and
 * continues with a range request), over several connections for a large file, retried with
 * backoff, a stalled connection dropped and retried, the digest verified before the atomic rename.
 *
 * Bytes are gathered into large blocks and written at their offsets with one write in flight
 * while the next block fills, so the disk never waits on a tiny write per network chunk.
 */
import { createHash, type Hash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { constants, createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { STATUS_CODES } from 'node:http';
import { basename, dirname } from 'node:path';
import { z } from 'zod';
import { LlmgwError, messageOf } from '../core/errors.js';
import { incompletePath } from './cache-layout.js';
import { httpGet } from './http-get.js';

export type FileDigest = { algorithm: 'sha256' | 'git-sha1'; hex: string };

export interface FetchFileOptions {
  /** GET; redirects followed (the hub redirects to a CDN). */
  url: string;
  /** Sent only to url's own origin, never after a redirect to another origin (a token stays with the hub). */
  headers?: Record<string, string>;
  /** The blob path: bytes go to incompletePath(dest), renamed to dest once verified. */
  dest: string;
  /** Expected bytes. */
  size: number;
  /** What messages call the file (default: dest's name, a digest); say the origin's path instead. */
  name?: string;
  /** git-sha1 = sha1("blob <size>\0" + bytes), the git blob id of a small hub file. */
  digest?: FileDigest;
  /** Parallel ranges; default 1 below 64 MB, else up to 8 parts of at least 32 MB. */
  connections?: number;
  /** No byte for this long: that connection is dropped and retried (default 30 s). */
  stallMs?: number;
  /** Tries after the first, per part (default 6); the count starts again once a try made progress. */
  retries?: number;
  /** First backoff (default 1 s), doubled per failure up to retryMaxMs (default 30 s). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Total bytes on disk so far, resumed ones included; with one connection also the contiguous prefix. */
  onProgress?: (bytesDone: number) => void;
  signal?: AbortSignal;
  /** Injected (tests, a proxy-aware fetch); by default a plain HTTP/1.1 client over node:net/tls (http-get.ts), at half node:http's CPU per byte. */
  fetch?: typeof fetch;
}

/** The bytes fetched are not those the origin names: the file is deleted and must be fetched again. */
export class DigestMismatchError extends LlmgwError {
  readonly file: string;
  readonly algorithm: FileDigest['algorithm'];
  readonly expected: string;
  readonly actual: string;

  constructor(file: string, digest: FileDigest, actual: string) {
    super(
      'unavailable',
      `${file}: its ${digest.algorithm} is ${actual}, the origin says ${digest.hex}; the file was deleted and will be fetched again`,
    );
    this.name = 'DigestMismatchError';
    this.file = file;
    this.algorithm = digest.algorithm;
    this.expected = digest.hex;
    this.actual = actual;
  }
}

const MB = 1024 * 1024;
const blockBytes = 1 * MB;
/** A block is written at least this often on a slow link, so progress (and a mirror's reader) moves. */
const flushEveryMs = 250;
const partsSaveEveryMs = 1000;
const maxRedirects = 10;

/** The default split: one connection below 64 MB, else up to 8 parts of at least 32 MB. */
export function defaultConnections(size: number): number {
  if (size < 64 * MB) return 1;
  return Math.max(1, Math.min(8, Math.floor(size / (32 * MB))));
}

interface Part {
  start: number;
  /** Exclusive. */
  end: number;
  /** Bytes of [start, end) on disk. */
  done: number;
}

const partsFileSchema = z.object({
  size: z.number().int().nonnegative(),
  parts: z.array(
    z.object({
      start: z.number().int().nonnegative(),
      end: z.number().int().nonnegative(),
      done: z.number().int().nonnegative(),
    }),
  ),
});

/** A try that may succeed when made again: a network error, a 5xx, 408 or 429, a stall, a cut body. */
class Retryable extends Error {
  readonly afterMs: number | undefined;
  constructor(message: string, afterMs?: number) {
    super(message);
    this.afterMs = afterMs;
  }
}

/** The server sent the whole file to a range request: parts cannot be fetched apart. */
class RangeIgnored extends Error {}

/** A URL as messages show it: without its query, which on a CDN holds a signature. */
function shownUrl(url: URL | string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function newHash(digest: FileDigest, size: number): Hash {
  if (digest.algorithm === 'sha256') return createHash('sha256');
  return createHash('sha1').update(`blob ${size}\0`);
}

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Seconds or an HTTP date, as Retry-After says it; undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * Gathers received chunks into blocks of about 1 MiB written at increasing offsets, in order,
 * one block gathering while the last is written; `written` is told the offset each block ends
 * at once it is on disk. The chunks are written as they are (one vectored write per block, no
 * copy: they are fresh buffers no one reuses). A block is also written after a quiet moment, so
 * progress (and a mirror's reader) moves on a slow or paused link.
 */
class BlockWriter {
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

interface Ctx {
  o: FetchFileOptions;
  name: string;
  stallMs: number;
}

/** One HTTP answer, whichever client fetched it. */
interface Answer {
  status: number;
  /** The address that answered (the last hop of redirects). */
  url: URL;
  header(name: string): string | null;
  /** Passes each body chunk to `take` until the body ends; a promise `take` returns pauses the body until it settles. */
  pump(take: (chunk: Uint8Array) => Promise<void> | undefined): Promise<void>;
  /** Leaves the body unread. */
  drop(): Promise<void>;
}

/** An injected fetch (tests, proxies): the body read through its web stream. */
async function viaFetch(
  fetchImpl: typeof fetch,
  url: URL,
  init: { headers: Record<string, string>; signal: AbortSignal },
): Promise<Answer> {
  const res = await fetchImpl(url, { ...init, redirect: 'manual' });
  return {
    status: res.status,
    url,
    header: (name) => res.headers.get(name),
    pump: async (take) => {
      if (res.body === null) return;
      const reader = res.body.getReader();
      for (;;) {
        const r = await reader.read();
        if (r.done) return;
        const wait = take(r.value as Uint8Array);
        if (wait !== undefined) await wait;
      }
    },
    drop: () => res.body?.cancel().catch(() => undefined) ?? Promise.resolve(),
  };
}

/** The default client: one GET per connection, the body as the socket's own buffers (see http-get.ts). */
async function viaSocket(
  url: URL,
  init: { headers: Record<string, string>; signal: AbortSignal },
): Promise<Answer> {
  return { ...(await httpGet(url, init)), url };
}

/** GETs a URL following redirects by hand, so the caller's headers stay with the URL's own origin. */
async function get(ctx: Ctx, range: string | undefined, signal: AbortSignal): Promise<Answer> {
  let url = new URL(ctx.o.url);
  const home = url.origin;
  let left = false;
  for (let hop = 0; hop <= maxRedirects; hop++) {
    left ||= url.origin !== home;
    const headers: Record<string, string> = {
      ...(left ? {} : ctx.o.headers),
      // A compressed body would not match byte ranges or sizes.
      'accept-encoding': 'identity',
    };
    if (range !== undefined) headers['range'] = range;
    let res: Answer;
    try {
      res =
        ctx.o.fetch === undefined
          ? await viaSocket(url, { headers, signal })
          : await viaFetch(ctx.o.fetch, url, { headers, signal });
    } catch (e) {
      if (signal.aborted) throw signal.reason;
      if (e instanceof LlmgwError) throw e;
      throw new Retryable(`${ctx.name}: GET ${shownUrl(url)} failed: ${messageOf((e as Error).cause ?? e)}`);
    }
    const location = res.header('location');
    if (res.status >= 300 && res.status < 400 && location !== null) {
      await res.drop();
      url = new URL(location, url);
      continue;
    }
    return res;
  }
  throw new LlmgwError(
    'unavailable',
    `${ctx.name}: GET ${shownUrl(ctx.o.url)} redirected more than ${maxRedirects} times`,
  );
}

/** The status in words, with the hub's own explanation when it gives one. */
async function refusal(ctx: Ctx, res: Answer): Promise<LlmgwError> {
  const words = `${res.status} ${STATUS_CODES[res.status] ?? ''}`.trim();
  const said = res.header('x-error-message');
  await res.drop();
  const hint =
    res.status === 401 || res.status === 403
      ? 'check hub.token and that its account has access to the repository'
      : res.status === 404
        ? 'the file is gone from where the origin says it was: resolve the model again'
        : res.status === 416
          ? 'the file on the server is shorter than the origin says: resolve the model again'
          : undefined;
  return new LlmgwError(
    res.status === 404 ? 'not_found' : 'unavailable',
    `${ctx.name}: GET ${shownUrl(res.url)} answered ${words}${said === null ? '' : ` (${said})`}${hint === undefined ? '' : `: ${hint}`}`,
  );
}

function sizeChanged(ctx: Ctx, said: number): LlmgwError {
  return new LlmgwError(
    'unavailable',
    `${ctx.name}: the server says it has ${said} bytes, the origin says ${ctx.o.size}: the file changed since the model was resolved; resolve it again`,
  );
}

/**
 * One try at [part.start + part.done, part.end): writes what arrives, moving part.done as blocks
 * reach the disk. With `whole`, a server that ignores the range restarts the part from 0
 * (`restart` is called to drop what was there); otherwise RangeIgnored is thrown.
 */
async function tryPart(
  ctx: Ctx,
  fh: FileHandle,
  part: Part,
  hooks: {
    whole: boolean;
    signal: AbortSignal;
    restart?: () => Promise<void>;
    /** More bytes of the part reached the disk (part.done moved). */
    written: () => void;
  },
): Promise<void> {
  const { size } = ctx.o;
  const from = part.start + part.done;
  const ac = new AbortController();
  const signal = AbortSignal.any([hooks.signal, ac.signal]);
  let received = 0;
  let seen = -1;
  let quietSince = Date.now();
  const stall = { seen: false };
  // A counter checked now and again costs nothing per chunk, unlike a timer reset on each.
  const watch = setInterval(
    () => {
      if (received !== seen) {
        seen = received;
        quietSince = Date.now();
      } else if (Date.now() - quietSince >= ctx.stallMs) {
        stall.seen = true;
        ac.abort(new Retryable(`${ctx.name}: no byte for ${ctx.stallMs} ms`));
      }
    },
    Math.max(5, Math.floor(ctx.stallMs / 4)),
  );
  let writer: BlockWriter | undefined;
  try {
    const ranged = hooks.whole ? from > 0 : true;
    const range = ranged ? `bytes=${from}-${hooks.whole ? '' : part.end - 1}` : undefined;
    const res = await get(ctx, range, signal);
    if (res.status === 408 || res.status === 429 || res.status >= 500) {
      await res.drop();
      throw new Retryable(
        `${ctx.name}: GET ${shownUrl(res.url)} answered ${res.status} ${STATUS_CODES[res.status] ?? ''}`.trim(),
        retryAfterMs(res.header('retry-after')),
      );
    }
    let at = from;
    if (res.status === 206) {
      const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.header('content-range') ?? '');
      if (m === null) {
        await res.drop();
        throw new LlmgwError(
          'unavailable',
          `${ctx.name}: the server answered a range request without a readable Content-Range ("${res.header('content-range') ?? ''}")`,
        );
      }
      if (m[3] !== '*' && Number(m[3]) !== size) {
        await res.drop();
        throw sizeChanged(ctx, Number(m[3]));
      }
      if (Number(m[1]) !== from || Number(m[2]) !== part.end - 1) {
        await res.drop();
        throw new LlmgwError(
          'unavailable',
          `${ctx.name}: asked for bytes ${from}-${part.end - 1}, the server answered ${m[1]}-${m[2]}`,
        );
      }
    } else if (res.status === 200) {
      const length = res.header('content-length');
      if (length !== null && Number(length) !== size) {
        await res.drop();
        throw sizeChanged(ctx, Number(length));
      }
      if (ranged) {
        if (!hooks.whole || part.start !== 0) {
          await res.drop();
          throw new RangeIgnored();
        }
        // The server ignored the range: the body starts at byte 0, so the part does too.
        part.done = 0;
        at = 0;
        await hooks.restart?.();
      }
    } else {
      throw await refusal(ctx, res);
    }
    const want = part.end - at;
    const w = new BlockWriter(fh, at, (end) => {
      part.done = end - part.start;
      hooks.written();
    });
    writer = w;
    try {
      await res.pump((chunk) => {
        // Bytes past the range asked for (a server's mistake) are not ours to write.
        const mine = received + chunk.length > want ? chunk.subarray(0, want - received) : chunk;
        received += mine.length;
        return w.add(mine);
      });
    } catch (e) {
      if (stall.seen || !hooks.signal.aborted) {
        throw signal.reason instanceof Retryable
          ? signal.reason
          : new Retryable(
              `${ctx.name}: the connection broke after ${received} bytes: ${messageOf((e as Error).cause ?? e)}`,
            );
      }
      // Stopped by the caller (or a sibling part's failure): say why, not how the socket died.
      throw hooks.signal.reason;
    }
    await writer.close();
    if (received < want) {
      throw new Retryable(`${ctx.name}: the connection ended after ${received} of ${want} bytes`);
    }
  } catch (e) {
    // What arrived is good data at its offsets: written, so a retry or a later run resumes after it.
    await writer?.close().catch(() => undefined);
    if (stall.seen && signal.reason instanceof Retryable) throw signal.reason;
    throw e;
  } finally {
    clearInterval(watch);
  }
}

/** Tries a part until it is whole, with backoff; the failure count starts again after progress. */
async function fetchPart(
  ctx: Ctx,
  fh: FileHandle,
  part: Part,
  hooks: Parameters<typeof tryPart>[3],
): Promise<void> {
  const retries = ctx.o.retries ?? 6;
  const base = ctx.o.retryBaseMs ?? 1000;
  const cap = ctx.o.retryMaxMs ?? 30_000;
  let failures = 0;
  while (part.start + part.done < part.end) {
    const before = part.done;
    try {
      await tryPart(ctx, fh, part, hooks);
      return;
    } catch (e) {
      if (!(e instanceof Retryable) || hooks.signal.aborted) throw e;
      if (part.done > before) failures = 0;
      if (failures >= retries) {
        throw new LlmgwError('unavailable', `${e.message}; gave up after ${retries + 1} tries`, { cause: e });
      }
      await sleep(Math.max(Math.min(base * 2 ** failures, cap), Math.min(e.afterMs ?? 0, cap)), hooks.signal);
      failures++;
    }
  }
}

/**
 * Follows the bytes on disk from byte 0 and says the file's digest once all are there. A large
 * file is hashed in a worker thread as its contiguous prefix grows, so the hashing overlaps the
 * download (and leaves the main thread to the network); a small one is read back at the end.
 */
interface Digester {
  /** Bytes [0, upTo) are on disk. */
  advance(upTo: number): void;
  /** The hex digest, once [0, size) is on disk. */
  finish(): Promise<string>;
  close(): Promise<void>;
}

/** Files this large get a hashing thread of their own. */
const workerDigestFrom = 16 * MB;

const digestWorkerCode = `
const { parentPort, workerData } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const { readSync } = require('node:fs');
const { fd, algorithm, size } = workerData;
const hash = algorithm === 'sha256' ? createHash('sha256') : createHash('sha1').update('blob ' + size + '\\0');
const buf = Buffer.allocUnsafe(4 * 1024 * 1024);
let at = 0, upTo = 0, finishing = false;
parentPort.on('message', (m) => {
  if (m < 0) finishing = true; else if (m > upTo) upTo = m;
  while (at < upTo) {
    const n = readSync(fd, buf, 0, Math.min(buf.length, upTo - at), at);
    if (n === 0) throw new Error('the file ended at ' + at + ' bytes');
    hash.update(n === buf.length ? buf : buf.subarray(0, n));
    at += n;
  }
  if (finishing && at >= size) parentPort.postMessage(hash.digest('hex'));
});
`;

async function workerDigester(path: string, digest: FileDigest, size: number): Promise<Digester> {
  // Opened here and closed here: a descriptor a worker opens outlives the worker.
  const file = await open(path, 'r');
  const worker = new Worker(digestWorkerCode, {
    eval: true,
    // The code is CommonJS: a process started with --input-type=module would pass that on to it.
    execArgv: process.execArgv.filter((a) => !a.startsWith('--input-type')),
    workerData: { fd: file.fd, algorithm: digest.algorithm, size },
  });
  worker.unref();
  const result = new Promise<string>((resolve, reject) => {
    worker.once('message', (hex: string) => resolve(hex));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the hashing thread stopped (${code})`)));
  });
  result.catch(() => undefined);
  let posted = 0;
  return {
    advance: (upTo) => {
      // Now and again, not per block: each message wakes the thread.
      if (upTo - posted < 8 * MB) return;
      posted = upTo;
      worker.postMessage(upTo);
    },
    finish: () => {
      worker.postMessage(size);
      worker.postMessage(-1);
      return result;
    },
    close: async () => {
      await worker.terminate();
      await file.close();
    },
  };
}

function rereadDigester(path: string, digest: FileDigest, size: number): Digester {
  return {
    advance: () => undefined,
    finish: async () => {
      const hash = newHash(digest, size);
      await hashFile(path, hash);
      return hash.digest('hex');
    },
    close: () => Promise.resolve(),
  };
}

function digester(path: string, digest: FileDigest | undefined, size: number): Promise<Digester | undefined> {
  if (digest === undefined) return Promise.resolve(undefined);
  return size >= workerDigestFrom
    ? workerDigester(path, digest, size)
    : Promise.resolve(rereadDigester(path, digest, size));
}

/** Where the bytes on disk stop being contiguous from byte 0. */
function contiguous(parts: Part[]): number {
  let end = 0;
  for (const p of [...parts].sort((a, b) => a.start - b.start)) {
    if (p.start > end) break;
    end = p.start + p.done;
    if (p.start + p.done < p.end) break;
  }
  return end;
}

/** Reads a file back through its digest (after a fetch in parts, or a resumed prefix). */
async function hashFile(path: string, hash: Hash, end?: number): Promise<void> {
  if (end === 0) return;
  const stream = createReadStream(path, {
    highWaterMark: blockBytes,
    ...(end === undefined ? {} : { end: end - 1 }),
  });
  for await (const chunk of stream) hash.update(chunk as Buffer);
}

function splitParts(from: number, size: number, n: number): Part[] {
  const parts: Part[] = [];
  const each = Math.ceil((size - from) / n);
  for (let start = from; start < size; start += each)
    parts.push({ start, end: Math.min(size, start + each), done: 0 });
  return parts;
}

async function readParts(path: string, size: number): Promise<Part[] | undefined> {
  try {
    const saved = partsFileSchema.parse(JSON.parse(await readFile(path, 'utf8')));
    let next = 0;
    for (const p of saved.parts) {
      if (p.start !== next || p.end < p.start || p.done > p.end - p.start) return undefined;
      next = p.end;
    }
    return saved.size === size && next === size ? saved.parts : undefined;
  } catch {
    // Absent, or torn by a crash mid-write: the parts start over, which is correct, only slower.
    return undefined;
  }
}

async function saveParts(path: string, size: number, parts: Part[]): Promise<void> {
  // Written beside and renamed over, so a crash never leaves half a JSON.
  await writeFile(`${path}.tmp`, JSON.stringify({ size, parts }));
  await rename(`${path}.tmp`, path);
}

/** Fetches `url` into `dest` (see FetchFileOptions); resolves once dest holds the verified bytes. */
export async function fetchFile(o: FetchFileOptions): Promise<void> {
  if (!Number.isInteger(o.size) || o.size < 0)
    throw new LlmgwError('invalid_argument', `${o.dest}: size ${o.size} is not a byte count`);
  const existing = await sizeOf(o.dest);
  if (existing === o.size) return;
  if (existing !== undefined) await rm(o.dest, { force: true });
  await mkdir(dirname(o.dest), { recursive: true });
  const ctx: Ctx = {
    o,
    name: o.name ?? basename(o.dest),
    stallMs: o.stallMs ?? 30_000,
  };
  const tmp = incompletePath(o.dest);
  const partsPath = `${tmp}.parts`;
  const signal = o.signal ?? new AbortController().signal;
  signal.throwIfAborted();

  let parts = await readParts(partsPath, o.size);
  let onDisk = (await sizeOf(tmp)) ?? 0;
  if (parts === undefined && (await sizeOf(partsPath)) !== undefined) {
    // Parts of another size, or unreadable: what the file holds is unknown, so it starts over.
    await rm(tmp, { force: true });
    await rm(partsPath, { force: true });
    onDisk = 0;
  }
  if (parts === undefined) {
    // A prefix left by one connection; the rest split anew.
    const prefix = onDisk <= o.size ? onDisk : 0;
    const n = Math.max(1, Math.min(o.connections ?? defaultConnections(o.size), o.size - prefix));
    parts =
      n === 1
        ? [{ start: 0, end: o.size, done: prefix }]
        : [{ start: 0, end: prefix, done: prefix }, ...splitParts(prefix, o.size, n)].filter(
            (p) => p.end > p.start,
          );
    if (parts.length === 0) parts = [{ start: 0, end: 0, done: 0 }];
  }

  const fh = await open(tmp, constants.O_RDWR | constants.O_CREAT);
  const hashing: { d: Digester | undefined } = { d: undefined };
  try {
    hashing.d = await digester(tmp, o.digest, o.size);
    if (parts.length === 1) {
      const part = parts[0] ?? { start: 0, end: o.size, done: 0 };
      await fetchWhole(ctx, fh, { part, onDisk, signal, hashing });
    } else {
      await fetchInParts(ctx, fh, { parts, partsPath, signal, hashing });
    }
    await checkAndPlace(ctx, hashing.d);
  } finally {
    await hashing.d?.close();
    await fh.close();
  }
}

/** Verifies the size and the digest of the fetched bytes, then renames them into place. */
async function checkAndPlace(ctx: Ctx, d: Digester | undefined): Promise<void> {
  const { o, name } = ctx;
  const tmp = incompletePath(o.dest);

  const got = (await sizeOf(tmp)) ?? 0;
  if (got !== o.size) {
    await rm(tmp, { force: true });
    throw new LlmgwError(
      'unavailable',
      `${name}: ${got} bytes arrived, the origin says ${o.size}; the file was deleted and will be fetched again`,
    );
  }
  if (o.digest !== undefined && d !== undefined) {
    d.advance(o.size);
    const actual = await d.finish();
    if (actual !== o.digest.hex.toLowerCase()) {
      await rm(tmp, { force: true });
      throw new DigestMismatchError(name, o.digest, actual);
    }
  }
  await rename(tmp, o.dest);
}

/** One connection: appends from the prefix on disk, the digest following the bytes as they land. */
async function fetchWhole(
  ctx: Ctx,
  fh: FileHandle,
  w: { part: Part; onDisk: number; signal: AbortSignal; hashing: { d: Digester | undefined } },
): Promise<void> {
  const { o } = ctx;
  const { part, hashing } = w;
  if (w.onDisk > part.done) await fh.truncate(part.done);
  hashing.d?.advance(part.done);
  o.onProgress?.(part.done);
  await fetchPart(ctx, fh, part, {
    whole: true,
    signal: w.signal,
    restart: async () => {
      // The bytes hashed so far are not the file's start any more: a new digest from 0.
      await hashing.d?.close();
      hashing.d = undefined;
      await fh.truncate(0);
      hashing.d = await digester(incompletePath(o.dest), o.digest, o.size);
      o.onProgress?.(0);
    },
    written: () => {
      hashing.d?.advance(part.done);
      o.onProgress?.(part.done);
    },
  });
}

/** Several connections, each on its own range; progress saved beside the file now and again. */
async function fetchInParts(
  ctx: Ctx,
  fh: FileHandle,
  w: { parts: Part[]; partsPath: string; signal: AbortSignal; hashing: { d: Digester | undefined } },
): Promise<void> {
  const { o } = ctx;
  const { parts } = w;
  const total = () => parts.reduce((sum, p) => sum + p.done, 0);
  // The parts are saved before the file grows sparse to its full size: its length then says nothing.
  await saveParts(w.partsPath, o.size, parts);
  if ((await fh.stat()).size < o.size) await fh.truncate(o.size);
  o.onProgress?.(total());
  w.hashing.d?.advance(contiguous(parts));
  const ac = new AbortController();
  const signal = AbortSignal.any([w.signal, ac.signal]);
  let saving: Promise<void> = Promise.resolve();
  const save = () => {
    saving = saving.then(() => saveParts(w.partsPath, o.size, parts)).catch(() => undefined);
  };
  const timer = setInterval(save, partsSaveEveryMs);
  let ignored = false;
  try {
    const results = await Promise.allSettled(
      parts
        .filter((p) => p.start + p.done < p.end)
        .map((p) =>
          fetchPart(ctx, fh, p, {
            whole: false,
            signal,
            written: () => {
              w.hashing.d?.advance(contiguous(parts));
              o.onProgress?.(total());
            },
          }).catch((e: unknown) => {
            ac.abort(e);
            throw e;
          }),
        ),
    );
    const failed = results.find(
      (r): r is PromiseRejectedResult => r.status === 'rejected' && !(r.reason instanceof RangeIgnored),
    );
    ignored = results.some((r) => r.status === 'rejected' && r.reason instanceof RangeIgnored);
    if (failed !== undefined && !ignored) throw failed.reason;
    if (w.signal.aborted) throw w.signal.reason;
  } finally {
    clearInterval(timer);
    save();
    await saving;
  }
  if (ignored) {
    // The server sends whole files only: one connection from byte 0.
    await rm(w.partsPath, { force: true });
    await w.hashing.d?.close();
    w.hashing.d = undefined;
    await fh.truncate(0);
    w.hashing.d = await digester(incompletePath(o.dest), o.digest, o.size);
    await fetchWhole(ctx, fh, {
      part: { start: 0, end: o.size, done: 0 },
      onDisk: 0,
      signal: w.signal,
      hashing: w.hashing,
    });
    return;
  }
  await rm(w.partsPath, { force: true });
}
