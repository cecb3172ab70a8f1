/**
 * Fetches one file into its blob path: resumable (a partial `.incomplete` survives a restart and
 * continues with a range request), over several connections for a large file, retried with
 * backoff, a stalled connection dropped and retried, the digest verified before the atomic rename.
 * Model files and engines' archives both come this way; each caller says failures in its own
 * words (download/wording.ts).
 *
 * Bytes are gathered into large blocks and written at their offsets with one write in flight
 * while the next block fills, so the disk never waits on a tiny write per network chunk.
 */
import { constants } from 'node:fs';
import { mkdir, open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';

import { LlmgwError } from '../core/errors.js';

import { incompletePath } from './cache-layout.js';
import { fetchPart, RangeIgnored, type Ctx } from './download/attempt.js';
import { digester, type Digester } from './download/digester.js';
import type { FetchedFile, FetchFileOptions, FileDigest } from './download/options.js';
import {
  contiguous,
  defaultConnections,
  readParts,
  saveParts,
  splitParts,
  type Part,
} from './download/parts.js';
import { fileWording } from './download/wording.js';

export type { FetchedFile, FetchFileOptions, FileDigest } from './download/options.js';
export { defaultConnections } from './download/parts.js';
export type { Failure, Wording } from './download/wording.js';

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

const partsSaveEveryMs = 1000;

/** The digester of a fetch, replaced when the bytes on disk start over from 0. */
type Hashing = { d: Digester | undefined };

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Fetches `url` into `dest` (see FetchFileOptions); resolves once dest holds the verified bytes. */
export async function fetchFile(o: FetchFileOptions): Promise<FetchedFile> {
  if (o.size !== undefined && (!Number.isInteger(o.size) || o.size < 0))
    throw new LlmgwError('invalid_argument', `${o.dest}: size ${o.size} is not a byte count`);
  const existing = await sizeOf(o.dest);
  if (o.size !== undefined && existing === o.size)
    return { bytes: o.size, hex: await digestOfPlaced(o, o.size) };
  if (existing !== undefined) await rm(o.dest, { force: true });
  await mkdir(dirname(o.dest), { recursive: true });
  const name = o.name ?? basename(o.dest);
  const ctx: Ctx = {
    url: o.url,
    headers: o.headers,
    fetch: o.fetch,
    name,
    wording: o.wording ?? fileWording(name),
    stallMs: o.stallMs ?? 30_000,
    retries: o.retries ?? 6,
    retryBaseMs: o.retryBaseMs ?? 1000,
    retryMaxMs: o.retryMaxMs ?? 30_000,
    size: o.size,
  };
  const tmp = incompletePath(o.dest);
  const partsPath = `${tmp}.parts`;
  const signal = o.signal ?? new AbortController().signal;
  signal.throwIfAborted();

  const { parts, onDisk } = await plan(o, tmp, partsPath);
  const fh = await open(tmp, constants.O_RDWR | constants.O_CREAT);
  const hashing: Hashing = { d: undefined };
  try {
    hashing.d = await digester(tmp, o.digest?.algorithm, o.size);
    if (parts.length === 1) {
      const part = parts[0] ?? { start: 0, end: ctx.size ?? Infinity, done: 0 };
      await fetchWhole(o, ctx, fh, { part, onDisk, signal, hashing });
    } else {
      await fetchInParts(o, ctx, fh, { parts, partsPath, signal, hashing });
    }
    return await checkAndPlace(o, ctx, hashing.d);
  } finally {
    await hashing.d?.close();
    await fh.close();
  }
}

/** The parts to fetch: those saved by an earlier run, or the prefix on disk and the rest split anew. */
async function plan(
  o: FetchFileOptions,
  tmp: string,
  partsPath: string,
): Promise<{ parts: Part[]; onDisk: number }> {
  let onDisk = (await sizeOf(tmp)) ?? 0;
  if (o.size === undefined) {
    // No size to split or to check a prefix against: one connection, from what is on disk.
    return { parts: [{ start: 0, end: Infinity, done: onDisk }], onDisk };
  }
  const saved = await readParts(partsPath, o.size);
  if (saved !== undefined) return { parts: saved, onDisk };
  if ((await sizeOf(partsPath)) !== undefined) {
    // Parts of another size, or unreadable: what the file holds is unknown, so it starts over.
    await rm(tmp, { force: true });
    await rm(partsPath, { force: true });
    onDisk = 0;
  }
  // A prefix left by one connection; the rest split anew.
  const prefix = onDisk <= o.size ? onDisk : 0;
  const n = Math.max(1, Math.min(o.connections ?? defaultConnections(o.size), o.size - prefix));
  let parts =
    n === 1
      ? [{ start: 0, end: o.size, done: prefix }]
      : [{ start: 0, end: prefix, done: prefix }, ...splitParts(prefix, o.size, n)].filter(
          (p) => p.end > p.start,
        );
  if (parts.length === 0) parts = [{ start: 0, end: 0, done: 0 }];
  return { parts, onDisk };
}

/** The digest of a file already in place, when one is asked for without a value to check. */
async function digestOfPlaced(o: FetchFileOptions, size: number): Promise<string | undefined> {
  if (o.digest === undefined) return undefined;
  if (o.digest.hex !== undefined) return o.digest.hex.toLowerCase();
  const d = await digester(o.dest, o.digest.algorithm, undefined);
  return d?.finish(size);
}

/** Verifies the size and the digest of the fetched bytes, then renames them into place. */
async function checkAndPlace(o: FetchFileOptions, ctx: Ctx, d: Digester | undefined): Promise<FetchedFile> {
  const tmp = incompletePath(o.dest);
  const got = (await sizeOf(tmp)) ?? 0;
  const size = ctx.size ?? got;
  if (got !== size) {
    await rm(tmp, { force: true });
    throw new LlmgwError(
      'unavailable',
      `${ctx.name}: ${got} bytes arrived, the origin says ${size}; the file was deleted and will be fetched again`,
    );
  }
  let hex: string | undefined;
  if (d !== undefined) {
    d.advance(size);
    hex = await d.finish(size);
    const expected = o.digest?.hex;
    if (o.digest !== undefined && expected !== undefined && hex !== expected.toLowerCase()) {
      await rm(tmp, { force: true });
      throw new DigestMismatchError(ctx.name, { algorithm: o.digest.algorithm, hex: expected }, hex);
    }
  }
  await rename(tmp, o.dest);
  return { bytes: size, hex };
}

/** One connection: appends from the prefix on disk, the digest following the bytes as they land. */
async function fetchWhole(
  o: FetchFileOptions,
  ctx: Ctx,
  fh: FileHandle,
  w: { part: Part; onDisk: number; signal: AbortSignal; hashing: Hashing },
): Promise<void> {
  const { part, hashing } = w;
  if (w.onDisk > part.done) await fh.truncate(part.done);
  hashing.d?.advance(part.done);
  // A file of unknown size tells its progress once its answer says the size (attempt.ts).
  if (ctx.size !== undefined) o.onProgress?.(part.done, ctx.size);
  await fetchPart(ctx, fh, part, {
    whole: true,
    signal: w.signal,
    restart: async () => {
      // The bytes hashed so far are not the file's start any more: a new digest from 0.
      await hashing.d?.close();
      hashing.d = undefined;
      await fh.truncate(0);
      hashing.d = await digester(incompletePath(o.dest), o.digest?.algorithm, ctx.size);
      o.onProgress?.(0, ctx.size);
    },
    written: () => {
      hashing.d?.advance(part.done);
      o.onProgress?.(part.done, ctx.size);
    },
  });
}

/** Several connections, each on its own range; progress saved beside the file now and again. */
async function fetchInParts(
  o: FetchFileOptions,
  ctx: Ctx,
  fh: FileHandle,
  w: { parts: Part[]; partsPath: string; signal: AbortSignal; hashing: Hashing },
): Promise<void> {
  const { parts } = w;
  // Only a file of known size is split (plan()).
  const size = ctx.size ?? 0;
  const total = () => parts.reduce((sum, p) => sum + p.done, 0);
  // The parts are saved before the file grows sparse to its full size: its length then says nothing.
  await saveParts(w.partsPath, size, parts);
  if ((await fh.stat()).size < size) await fh.truncate(size);
  o.onProgress?.(total(), size);
  w.hashing.d?.advance(contiguous(parts));
  const ac = new AbortController();
  const signal = AbortSignal.any([w.signal, ac.signal]);
  let saving: Promise<void> = Promise.resolve();
  const save = () => {
    saving = saving.then(() => saveParts(w.partsPath, size, parts)).catch(() => undefined);
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
              o.onProgress?.(total(), size);
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
    w.hashing.d = await digester(incompletePath(o.dest), o.digest?.algorithm, size);
    await fetchWhole(o, ctx, fh, {
      part: { start: 0, end: size, done: 0 },
      onDisk: 0,
      signal: w.signal,
      hashing: w.hashing,
    });
    return;
  }
  await rm(w.partsPath, { force: true });
}
