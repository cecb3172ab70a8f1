import type { FileHandle } from 'node:fs/promises';

import { LlmgwError } from '../../core/errors.js';

import { BlockWriter } from './block-writer.js';
import type { Part } from './parts.js';
import { get, Unanswered } from './request.js';
import type { Failure, Wording } from './wording.js';

/** What every try at one file shares. */
export interface Ctx {
  url: string;
  headers: Record<string, string> | undefined;
  fetch: typeof fetch | undefined;
  /** What messages call the file. */
  name: string;
  wording: Wording;
  stallMs: number;
  retries: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** The file's size: given, or learnt from the first answer (undefined until then). */
  size: number | undefined;
}

/** How a part's tries report to the fetch that runs them. */
export interface PartHooks {
  /** One connection for the whole file: a server that ignores the range restarts it from 0. */
  whole: boolean;
  signal: AbortSignal;
  /** Drops what is on disk: the server sends the whole file, from byte 0. */
  restart?: () => Promise<void>;
  /** More bytes of the part reached the disk (part.done moved), or the file's size became known. */
  written: () => void;
}

/** A try that may succeed when made again: a network error, a 5xx, 408 or 429, a stall, a cut body. */
export class Retryable extends Error {
  readonly failure: Failure;
  readonly afterMs: number | undefined;
  constructor(ctx: Ctx, failure: Failure, afterMs?: number) {
    super(ctx.wording.failure(failure));
    this.failure = failure;
    this.afterMs = afterMs;
  }
}

/** The server sent the whole file to a range request: parts cannot be fetched apart. */
export class RangeIgnored extends Error {}

/** Tries a part until it is whole, with backoff; the failure count starts again after progress. */
export async function fetchPart(ctx: Ctx, fh: FileHandle, part: Part, hooks: PartHooks): Promise<void> {
  let failures = 0;
  while (part.start + part.done < part.end) {
    const before = part.done;
    try {
      await tryPart(ctx, fh, part, hooks);
      return;
    } catch (e) {
      if (!(e instanceof Retryable) || hooks.signal.aborted) throw e;
      if (part.done > before) failures = 0;
      if (failures >= ctx.retries) throw ctx.wording.gaveUp(e.message, ctx.retries + 1, e);
      const cap = ctx.retryMaxMs;
      await sleep(
        Math.max(Math.min(ctx.retryBaseMs * 2 ** failures, cap), Math.min(e.afterMs ?? 0, cap)),
        hooks.signal,
      );
      failures++;
    }
  }
}

/**
 * One try at [part.start + part.done, part.end): writes what arrives, moving part.done as blocks
 * reach the disk. With `whole`, a server that ignores the range restarts the part from 0
 * (`restart` is called to drop what was there); otherwise RangeIgnored is thrown.
 */
async function tryPart(ctx: Ctx, fh: FileHandle, part: Part, hooks: PartHooks): Promise<void> {
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
        ac.abort(new Retryable(ctx, { kind: 'stalled', ms: ctx.stallMs }));
      }
    },
    Math.max(5, Math.floor(ctx.stallMs / 4)),
  );
  let writer: BlockWriter | undefined;
  try {
    const ranged = hooks.whole ? from > 0 : true;
    const range = ranged ? `bytes=${from}-${hooks.whole ? '' : part.end - 1}` : undefined;
    const res = await get(
      { url: ctx.url, headers: ctx.headers, range, signal, fetch: ctx.fetch },
      ctx.name,
    ).catch((e: unknown) => {
      throw e instanceof Unanswered
        ? new Retryable(ctx, { kind: 'unreachable', url: e.url, cause: e.cause })
        : e;
    });
    if (res.status === 408 || res.status === 429 || res.status >= 500) {
      await res.drop();
      throw new Retryable(
        ctx,
        { kind: 'status', url: res.url, status: res.status },
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
      if (m[3] !== '*') learnSize(ctx, part, Number(m[3]), hooks);
      if (m[3] !== '*' && ctx.size !== undefined && Number(m[3]) !== ctx.size) {
        await res.drop();
        throw sizeChanged(ctx.name, Number(m[3]), ctx.size);
      }
      if (Number(m[1]) !== from || (Number(m[2]) !== part.end - 1 && part.end !== Infinity)) {
        await res.drop();
        throw new LlmgwError(
          'unavailable',
          `${ctx.name}: asked for bytes ${from}-${part.end - 1}, the server answered ${m[1]}-${m[2]}`,
        );
      }
    } else if (res.status === 200) {
      const length = res.header('content-length');
      if (length !== null && /^\d+$/.test(length)) learnSize(ctx, part, Number(length), hooks);
      if (length !== null && ctx.size !== undefined && Number(length) !== ctx.size) {
        await res.drop();
        throw sizeChanged(ctx.name, Number(length), ctx.size);
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
      const refusal = ctx.wording.refused(res);
      await res.drop();
      throw refusal;
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
          : new Retryable(ctx, { kind: 'broke', received, cause: e });
      }
      // Stopped by the caller (or a sibling part's failure): say why, not how the socket died.
      throw hooks.signal.reason;
    }
    await writer.close();
    if (part.end === Infinity) {
      // No size was given or said: the body's end is the file's.
      part.end = at + received;
      ctx.size = part.end;
    }
    if (received < part.end - at) {
      throw new Retryable(ctx, { kind: 'short', received, want: part.end - at });
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

/** The first answer to say how large a file of unknown size is settles it. */
function learnSize(ctx: Ctx, part: Part, size: number, hooks: PartHooks): void {
  if (ctx.size !== undefined) return;
  ctx.size = size;
  part.end = size;
  hooks.written();
}

function sizeChanged(name: string, said: number, size: number): LlmgwError {
  return new LlmgwError(
    'unavailable',
    `${name}: the server says it has ${said} bytes, the origin says ${size}: the file changed since the model was resolved; resolve it again`,
  );
}

/** Seconds or an HTTP date, as Retry-After says it; undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
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
