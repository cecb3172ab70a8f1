/**
 * Ensures every file of one origin is in a cache root, in the Hugging Face layout: the blobs
 * fetched (one download per blob however many callers want it), then the snapshot's relative
 * links and the ref file. Free disk is checked before a byte is fetched.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, mkdir, readlink, rename, stat, statfs, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { LlmgwError, messageOf } from '../core/errors.js';
import { urlSourceFile } from './cache.js';
import { blobKey, digestOf, filePaths, incompletePath, originLayout } from './cache-layout.js';
import { DigestMismatchError, fetchFile, type FetchFileOptions, type FileDigest } from './download.js';
import type { Origin, OriginFile } from './origin.js';

/** Where one file of an origin is fetched from, and with which headers (a hub token). */
/** Where one file comes from; `connections` overrides the fetcher's (e.g. one, from a mirror on the LAN). */
export type FileSource = (file: OriginFile) => {
  url: string;
  headers?: Record<string, string>;
  connections?: number;
};

/** What of fetchFile's options every download of a fetcher shares. */
export type FetchDefaults = Pick<
  FetchFileOptions,
  'connections' | 'stallMs' | 'retries' | 'retryBaseMs' | 'retryMaxMs' | 'fetch'
>;

/** A pino-like logger; every method optional so any logger (or none) fits. */
export interface FetcherLogger {
  info?(obj: object, msg?: string): void;
  warn?(obj: object, msg?: string): void;
}

export interface ModelFetcherOptions {
  root: string;
  /** Bytes free to an unprivileged writer at dir (default: statfs). */
  freeBytes?: (dir: string) => Promise<number>;
  fetchDefaults?: FetchDefaults;
  /** Files of one origin fetched at once (default 3; a large file also uses several connections). */
  filesAtOnce?: number;
  logger?: FetcherLogger;
  /** The clock of the rate window, for tests. */
  now?: () => number;
}

export type FetchState = 'queued' | 'downloading' | 'verifying' | 'done' | 'failed';

export interface FetchProgress {
  done: number;
  total: number;
  /** Over the last seconds (a sliding window), not since the start. */
  rate_bps: number;
  eta_s?: number;
}

export interface FetchResult {
  snapshotDir: string;
  /** Origin path -> the path to give an engine (a snapshot link, a hand-placed file, or a local path). */
  paths: Record<string, string>;
}

export interface FetchJob {
  readonly done: Promise<FetchResult>;
  progress(): FetchProgress;
  readonly state: FetchState;
  readonly error: string | undefined;
  /** Stops this job; a blob another job still wants goes on for that one. */
  cancel(): void;
}

/** One blob being fetched, shared by every job that wants it. */
interface BlobDownload {
  key: string;
  size: number;
  bytes: number;
  users: number;
  controller: AbortController;
  promise: Promise<void>;
}

const rateWindowMs = 8000;

async function defaultFreeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** 4.7 GB, 512 MB: sizes as people read them (decimal, as the hub shows them). */
export function formatBytes(n: number): string {
  const units = ['bytes', 'kB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return u === 0 ? `${n} bytes` : `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${units[u] ?? ''}`;
}

async function lstatOrUndefined(path: string) {
  try {
    return await lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

async function digestFile(path: string, digest: FileDigest, size: number): Promise<string> {
  const hash =
    digest.algorithm === 'sha256' ? createHash('sha256') : createHash('sha1').update(`blob ${size}\0`);
  for await (const chunk of createReadStream(path, { highWaterMark: 4 * 1024 * 1024 }))
    hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Points `path` at `target`, replacing what is there in one rename (a reader never sees it absent). */
async function linkAtomically(path: string, target: string): Promise<void> {
  const existing = await lstatOrUndefined(path);
  if (existing?.isSymbolicLink() && (await readlink(path)) === target) return;
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.link`;
  await symlink(target, tmp);
  await rename(tmp, path);
}

export class ModelFetcher {
  readonly #root: string;
  readonly #freeBytes: (dir: string) => Promise<number>;
  readonly #defaults: FetchDefaults;
  readonly #filesAtOnce: number;
  readonly #log: FetcherLogger;
  readonly #now: () => number;
  /** Running blob downloads by blob path. */
  readonly #blobs = new Map<string, BlobDownload>();
  /** Hand-placed snapshot files found to match their digest (path, size, mtime), so none is hashed twice. */
  readonly #verified = new Set<string>();

  constructor(options: ModelFetcherOptions) {
    this.#root = options.root;
    this.#freeBytes = options.freeBytes ?? defaultFreeBytes;
    this.#defaults = { ...options.fetchDefaults };
    this.#filesAtOnce = Math.max(1, options.filesAtOnce ?? 3);
    this.#log = options.logger ?? {};
    this.#now = options.now ?? Date.now;
  }

  /** Blob keys being fetched now: never to be evicted under a download. */
  fetching(): Set<string> {
    return new Set([...this.#blobs.values()].map((b) => b.key));
  }

  ensure(origin: Origin, where: FileSource): FetchJob {
    const total = origin.files.reduce((s, f) => s + f.size, 0);
    let state: FetchState = 'queued';
    let error: string | undefined;
    let present = 0;
    const mine = new Map<string, BlobDownload>();
    const cancelled = new AbortController();
    const samples: { t: number; done: number }[] = [];
    const doneBytes = () => present + [...mine.values()].reduce((s, b) => s + b.bytes, 0);
    const sample = () => {
      const t = this.#now();
      const done = doneBytes();
      const last = samples.at(-1);
      // Close samples merge, but never into the first: it anchors the window.
      if (last !== undefined && samples.length > 1 && t - last.t < 250) {
        last.done = done;
      } else samples.push({ t, done });
      // Keep one sample older than the window, so the rate spans all of it.
      while (samples.length > 2 && (samples[1]?.t ?? 0) <= t - rateWindowMs) samples.shift();
      if (state === 'downloading' && done >= total && total > 0) state = 'verifying';
    };

    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      for (const b of mine.values()) {
        b.users--;
        if (b.users === 0) b.controller.abort(new Error('no job wants this file any more'));
      }
    };

    const run = async (): Promise<FetchResult> => {
      if (origin.kind === 'path') return this.#local(origin);
      const layout = originLayout(this.#root, origin);
      if (layout === undefined) throw new Error('unreachable: only a path origin has no layout');
      const files = origin.files.map((file) => ({ file, ...filePaths(layout, origin, file) }));
      const paths: Record<string, string> = {};

      const missing: typeof files = [];
      const linked: typeof files = [];
      for (const f of files) {
        const here = await this.#present(f);
        if (here === undefined) missing.push(f);
        if (here !== 'placed') linked.push(f);
        paths[f.file.path] = f.snapshot;
        if (here !== undefined) present += f.file.size;
      }
      state = 'downloading';
      sample();
      await this.#checkDisk(origin, missing, mine);
      cancelled.signal.throwIfAborted();
      // The snapshot folder first, so a listing of the cache shows the bytes arriving under it.
      await mkdir(layout.snapshotDir, { recursive: true });
      if (origin.kind === 'url') await writeFile(join(layout.repoDir, urlSourceFile), origin.source);
      this.#log.info?.(
        { source: origin.source, files: missing.length, bytes: missing.reduce((s, f) => s + f.file.size, 0) },
        'fetching model files',
      );

      // A few files at once; each takes the next one left when it ends.
      const queue = [...missing];
      const worker = async () => {
        for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
          cancelled.signal.throwIfAborted();
          await this.#blob(f, where, { mine, sample, origin, cancelled: cancelled.signal });
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.#filesAtOnce, queue.length) }, worker));

      for (const f of linked) await linkAtomically(f.snapshot, f.link);
      if (layout.ref !== undefined) {
        await mkdir(dirname(layout.ref.path), { recursive: true });
        // As huggingface_hub writes it: the commit, no newline.
        await writeFile(layout.ref.path, layout.ref.commit);
      }
      return { snapshotDir: layout.snapshotDir, paths };
    };

    const done = run().then(
      (result) => {
        state = 'done';
        sample();
        release();
        this.#log.info?.({ source: origin.source, snapshot: result.snapshotDir }, 'model files ready');
        return result;
      },
      (e: unknown) => {
        state = 'failed';
        error = cancelled.signal.aborted ? 'cancelled' : messageOf(e);
        release();
        this.#log.warn?.({ source: origin.source, err: error }, 'model files not fetched');
        throw cancelled.signal.aborted
          ? new LlmgwError('unavailable', `fetching ${origin.source} was cancelled`)
          : e;
      },
    );
    // The caller may only poll progress; an unawaited failure must not crash the process.
    done.catch(() => undefined);

    const rateOf = () => {
      sample();
      const first = samples[0];
      const last = samples.at(-1);
      if (first === undefined || last === undefined || last.t - first.t < 500) return 0;
      return Math.max(0, ((last.done - first.done) * 1000) / (last.t - first.t));
    };

    return {
      done,
      get state() {
        return state;
      },
      get error() {
        return error;
      },
      progress: () => {
        const rate = state === 'done' || state === 'failed' ? 0 : rateOf();
        const d = state === 'done' ? total : doneBytes();
        const out: FetchProgress = { done: d, total, rate_bps: Math.round(rate) };
        if (rate > 0) out.eta_s = Math.ceil((total - d) / rate);
        return out;
      },
      cancel: () => {
        if (state === 'done' || state === 'failed') return;
        cancelled.abort(new Error('cancelled'));
        release();
      },
    };
  }

  /** A local path: used where it is, never copied. */
  async #local(origin: Origin): Promise<FetchResult> {
    const isFile = (await stat(origin.source)).isFile();
    const dir = isFile ? dirname(origin.source) : origin.source;
    const paths: Record<string, string> = {};
    for (const f of origin.files) paths[f.path] = isFile ? origin.source : join(dir, ...f.path.split('/'));
    return { snapshotDir: dir, paths };
  }

  /**
   * Where a file already is: its blob at the right size, or a real file at its snapshot path
   * whose digest matches (a mirror directory filled by hand, used as it is). Undefined when it
   * must be fetched.
   */
  async #present(f: {
    file: OriginFile;
    blob: string;
    snapshot: string;
  }): Promise<'blob' | 'placed' | undefined> {
    const blob = await lstatOrUndefined(f.blob);
    if (blob?.isFile() && blob.size === f.file.size) return 'blob';
    const placed = await lstatOrUndefined(f.snapshot);
    if (placed?.isFile() !== true || placed.size !== f.file.size) return undefined;
    const digest = digestOf(f.file);
    const seen = `${f.snapshot}\n${placed.size}\n${placed.mtimeMs}`;
    if (digest === undefined || this.#verified.has(seen)) return 'placed';
    const actual = await digestFile(f.snapshot, digest, f.file.size);
    if (actual !== digest.hex) {
      this.#log.warn?.(
        { file: f.snapshot, expected: digest.hex, actual },
        'a file placed by hand does not match its digest; fetching it',
      );
      return undefined;
    }
    this.#verified.add(seen);
    return 'placed';
  }

  /** Refuses, before any byte, a fetch the disk at the root cannot hold. */
  async #checkDisk(
    origin: Origin,
    missing: { file: OriginFile; blob: string }[],
    mine: Map<string, BlobDownload>,
  ): Promise<void> {
    let need = 0;
    for (const f of missing) {
      if (this.#blobs.has(f.blob)) continue; // joined: its room is already counted as taken
      const partial = await lstatOrUndefined(incompletePath(f.blob));
      // Blocks, not length: a file fetched in parts is sparse at its full size.
      const have = partial === undefined ? 0 : Math.min(f.file.size, partial.size, partial.blocks * 512);
      need += f.file.size - have;
    }
    if (need === 0) return;
    await mkdir(this.#root, { recursive: true });
    const free = await this.#freeBytes(this.#root);
    // Bytes other downloads will still write are not free for this one.
    let promised = 0;
    for (const [path, b] of this.#blobs) if (!mine.has(path)) promised += b.size - b.bytes;
    const available = Math.max(0, free - promised);
    if (need > available) {
      throw new LlmgwError(
        'precondition_failed',
        `${origin.source} needs ${formatBytes(need)} more on disk, and ${formatBytes(available)} is free at ${this.#root}${promised > 0 ? ` (${formatBytes(promised)} of it promised to other downloads)` : ''}: free space there, set agent.models.max_gb lower so the cache keeps less, or choose a smaller model`,
      );
    }
  }

  /** Fetches one blob, or joins the download of it already running; a digest mismatch is tried once more. */
  async #blob(
    f: { file: OriginFile; blob: string },
    where: FileSource,
    job: { mine: Map<string, BlobDownload>; sample: () => void; origin: Origin; cancelled: AbortSignal },
  ): Promise<void> {
    let d = this.#blobs.get(f.blob);
    if (d === undefined) {
      const controller = new AbortController();
      const created: BlobDownload = {
        key: blobKey(job.origin, f.file),
        size: f.file.size,
        bytes: 0,
        users: 0,
        controller,
        promise: Promise.resolve(),
      };
      const { url, headers, connections } = where(f.file);
      const once = () =>
        fetchFile({
          ...this.#defaults,
          ...(connections === undefined ? {} : { connections }),
          url,
          ...(headers === undefined ? {} : { headers }),
          dest: f.blob,
          size: f.file.size,
          name: `${job.origin.source}: ${f.file.path}`,
          ...(digestOf(f.file) === undefined ? {} : { digest: digestOf(f.file) }),
          signal: controller.signal,
          onProgress: (n) => {
            created.bytes = n;
            job.sample();
          },
        });
      created.promise = (async () => {
        try {
          await once();
        } catch (e) {
          if (!(e instanceof DigestMismatchError)) throw e;
          this.#log.warn?.({ file: f.file.path, expected: e.expected, actual: e.actual }, e.message);
          created.bytes = 0;
          try {
            await once();
          } catch (again) {
            if (!(again instanceof DigestMismatchError)) throw again;
            throw new LlmgwError(
              'unavailable',
              `${job.origin.source}: ${f.file.path}: fetched twice, and twice its ${again.algorithm} was not the origin's ${e.expected}: first ${e.actual}, then ${again.actual}; the server holds other bytes than the origin says, so resolve the model again or check the mirror or proxy in between`,
              { cause: again },
            );
          }
        } finally {
          this.#blobs.delete(f.blob);
        }
      })();
      created.promise.catch(() => undefined);
      this.#blobs.set(f.blob, created);
      d = created;
    }
    d.users++;
    job.mine.set(f.blob, d);
    // A cancelled job stops waiting at once, though another job may keep the blob coming.
    const { cancelled } = job;
    await Promise.race([
      d.promise,
      new Promise<never>((_, reject) => {
        if (cancelled.aborted) reject(cancelled.reason as Error);
        cancelled.addEventListener('abort', () => reject(cancelled.reason as Error), { once: true });
      }),
    ]);
  }
}
