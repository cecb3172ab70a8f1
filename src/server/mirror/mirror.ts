/**
 * The cluster's mirror of model files: agents fetch each file from the control plane, which
 * fetches it from the hub (or the URL source) once, serves it while it is still arriving, and
 * keeps it. The mirror's directory is a Hugging Face cache (src/models/cache-layout.ts), so an
 * offline site fills it by hand: a file present there and matching its digest is never fetched.
 */
import { createReadStream, type Stats } from 'node:fs';
import { lstat, mkdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { Readable } from 'node:stream';

import type { Logger } from 'pino';

import { LlmgwError, messageOf } from '../../core/errors.js';
import { clientText, redact } from '../../core/redact.js';
import {
  blobKey,
  digestOf,
  filePaths,
  hubFileUrl,
  incompletePath,
  originLayout,
  type OriginLayout,
} from '../../models/cache-layout.js';
import { DigestMismatchError, fetchFile } from '../../models/download.js';
import type { HubAccess } from '../../models/hub.js';
import type { Origin, OriginFile } from '../../models/origin.js';
import type { CacheEntry } from '../../protocol/agent-protocol.js';

import { fileDigest } from './file-digest.js';
import { linkedBlobs, listMirror, pruneEmpty } from './mirror-dir.js';
import { Fill, TailReader } from './fill.js';
import type { ByteRange } from './range.js';

export interface MirrorOptions {
  /** mirror.dir: the root of a Hugging Face cache. */
  dir: string;
  /** The hub's address and token as they are now (hub.endpoint, hub.token). */
  hub: () => HubAccess;
  /** The origin file whose blob key this is, among the catalog's models; undefined when none has it. */
  lookup: (key: string) => { origin: Origin; file: OriginFile } | undefined;
  /** mirror.enabled; when false the route refuses and agents go to the hub. Default true. */
  enabled?: boolean | (() => boolean);
  /** For tests: the fetch upstream requests go through. */
  fetch?: typeof fetch;
  /**
   * How hard one upstream fetch tries (fetchFile's options). Agents wait on it with no bytes
   * coming, and retry on their own, so by default it gives up after a few seconds of failures.
   */
  upstream?: { retries?: number; retryBaseMs?: number; stallMs?: number };
  logger: Logger;
}

/** A blob the mirror can serve: what it is and how large. */
export interface MirrorBlob {
  key: string;
  size: number;
  origin: Origin;
  file: OriginFile;
}

/** Where one blob lies in the mirror. */
interface Target extends MirrorBlob {
  layout: OriginLayout;
  blob: string;
  snapshot: string;
  /** The snapshot symlink's target, relative. */
  link: string;
}

/** What a blob is read from: a whole, checked file, or a fetch in progress. */
type Source = { kind: 'file'; path: string } | { kind: 'fill'; fill: Fill };

const keyPattern = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

export class Mirror {
  readonly #o: MirrorOptions;
  readonly #dir: string;
  readonly #log: Logger;
  readonly #fills = new Map<string, Fill>();
  /** Preparations in progress (a hand-placed file being checked), shared by concurrent requests. */
  readonly #preparing = new Map<string, Promise<Source>>();
  /** Files whose digest matched, as `size:mtime`: checked once, not on every request. */
  readonly #verified = new Map<string, string>();
  /** Keys whose snapshot link is known to be in place. */
  readonly #linked = new Set<string>();
  /** When each snapshot's files were last served. */
  readonly #lastServed = new Map<string, number>();
  #closed = false;

  constructor(options: MirrorOptions) {
    this.#o = options;
    this.#dir = resolve(options.dir);
    this.#log = options.logger;
  }

  get dir(): string {
    return this.#dir;
  }

  get enabled(): boolean {
    const e = this.#o.enabled ?? true;
    return typeof e === 'function' ? e() : e;
  }

  /** The blob of this key, from the catalog; refused in words when no model has it. */
  find(key: string): MirrorBlob {
    return this.#target(key);
  }

  /**
   * Bytes `range` of a blob. Resolves once the first of them can be read: at once for a file the
   * mirror holds, else when it has arrived from upstream (one fetch per blob, shared). Refused
   * with bad_gateway when the upstream fails before then; the stream ends in an error when it
   * fails later.
   */
  async read(key: string, range: ByteRange): Promise<Readable> {
    const target = this.#target(key);
    this.#lastServed.set(target.layout.snapshotDir, Date.now());
    const source = await this.#source(target);
    if (source.kind === 'fill') await source.fill.ready(range.start);
    // An empty file (or range): nothing to read, though the mirror keeps it all the same.
    if (range.end < range.start) return Readable.from([]);
    if (source.kind === 'file') {
      return createReadStream(source.path, { start: range.start, end: range.end, highWaterMark: 1 << 20 });
    }
    return new TailReader(source.fill, range);
  }

  /**
   * What the mirror holds, one entry per snapshot. `known` names the catalog's models of each
   * origin (and a URL source's address, which its folder name does not keep).
   */
  async list(known: readonly { model: string; origin: Origin }[] = []): Promise<CacheEntry[]> {
    // Files being fetched belong to a snapshot too, named by their origin though no model is given.
    const fetching = [...this.#fills.keys()].flatMap((key) => {
      const found = this.#o.lookup(key);
      return found === undefined ? [] : [{ origin: found.origin }];
    });
    return listMirror({ dir: this.#dir, origins: [...known, ...fetching], lastServed: this.#lastServed });
  }

  /**
   * Removes an origin's files from the mirror (`model rm --purge`): its snapshot, and the blobs no
   * other snapshot links to. A fetch of one of them in progress is stopped first.
   */
  async purge(origin: Origin): Promise<{ files: number; bytes: number }> {
    const layout = originLayout(this.#dir, origin);
    if (layout === undefined) return { files: 0, bytes: 0 };
    const targets = origin.files.map((file) => ({
      key: blobKey(origin, file),
      ...filePaths(layout, origin, file),
    }));
    for (const t of targets) {
      const fill = this.#fills.get(t.key);
      if (fill === undefined) continue;
      fill.abort.abort(new Error('the file was purged from the mirror'));
      await fill.settled;
    }
    const snapshotsDir = join(layout.repoDir, 'snapshots');
    const stillLinked = await linkedBlobs(snapshotsDir, layout.snapshotDir);
    let files = 0;
    let bytes = 0;
    const remove = async (path: string) => {
      const st = await lstat(path).catch(() => undefined);
      if (st === undefined) return;
      await rm(path, { force: true });
      this.#verified.delete(path);
      if (st.isFile()) {
        files++;
        bytes += st.size;
      }
    };
    for (const t of targets) {
      this.#linked.delete(t.key);
      await remove(t.snapshot);
      await pruneEmpty(dirname(t.snapshot), snapshotsDir);
      if (stillLinked.has(t.key)) continue;
      await remove(t.blob);
      await remove(incompletePath(t.blob));
    }
    if (layout.ref !== undefined) {
      const ref = await readFile(layout.ref.path, 'utf8').catch(() => undefined);
      if (ref?.trim() === layout.ref.commit) await rm(layout.ref.path, { force: true });
    }
    for (const sub of ['refs', 'blobs', 'snapshots']) await pruneEmpty(join(layout.repoDir, sub), this.#dir);
    this.#lastServed.delete(layout.snapshotDir);
    this.#log.info({ source: origin.source, files, bytes }, `purged ${origin.source} from the mirror`);
    return { files, bytes };
  }

  /** Resolves once no fetch is in progress (each ended, either way). */
  async idle(): Promise<void> {
    while (this.#fills.size > 0) await Promise.all([...this.#fills.values()].map((f) => f.settled));
  }

  /** Stops the fetches in progress (their partial files stay, to be resumed). */
  async close(): Promise<void> {
    this.#closed = true;
    const fills = [...this.#fills.values()];
    for (const f of fills) f.abort.abort(new Error('the control plane is stopping'));
    await Promise.all(fills.map((f) => f.settled));
  }

  #target(key: string): Target {
    const found = keyPattern.test(key) ? this.#o.lookup(key) : undefined;
    if (found === undefined) {
      throw new LlmgwError(
        'not_found',
        `no model in the catalog has a file with digest ${clientText(key)}: the mirror serves only the files of the catalog's models (llmgw ctl model show MODEL lists them)`,
      );
    }
    const { origin, file } = found;
    const layout = originLayout(this.#dir, origin);
    if (layout === undefined) {
      throw new LlmgwError(
        'not_found',
        `the file with digest ${key} is ${file.path} of the local path ${origin.source}, which nodes read in place: the mirror holds no copy of it`,
      );
    }
    const paths = filePaths(layout, origin, file);
    const inside = relative(layout.snapshotDir, paths.snapshot);
    if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) {
      throw new LlmgwError(
        'not_found',
        `the file with digest ${key} has the path "${clientText(file.path)}" in ${origin.source}, which leaves its snapshot directory: the mirror does not serve it`,
      );
    }
    return { key, size: file.size, origin, file, layout, ...paths };
  }

  async #source(target: Target): Promise<Source> {
    const fill = this.#fills.get(target.key);
    if (fill !== undefined) return { kind: 'fill', fill };
    let preparing = this.#preparing.get(target.key);
    if (preparing === undefined) {
      preparing = this.#prepare(target).finally(() => this.#preparing.delete(target.key));
      this.#preparing.set(target.key, preparing);
    }
    return preparing;
  }

  /** The file to serve: the blob, else a file placed by hand at its snapshot path, each checked once; else a fetch. */
  async #prepare(target: Target): Promise<Source> {
    const { blob, snapshot } = target;
    const blobStat = await stat(blob).catch(() => undefined);
    if (blobStat?.isFile() === true) {
      const problem = await this.#check(blob, blobStat, target);
      if (problem === undefined) {
        await this.#ensureLinked(target);
        return { kind: 'file', path: blob };
      }
      this.#log.warn(
        { path: blob, source: target.origin.source, file: target.file.path },
        `the mirror's blob ${blob} (${target.file.path} of ${target.origin.source}) ${problem}: it is removed and fetched again from upstream`,
      );
      await rm(blob, { force: true });
    }

    // A file placed by hand at its snapshot path (a regular file, or a link to somewhere else than the blob).
    const linkStat = await lstat(snapshot).catch(() => undefined);
    const pointsAtBlob =
      linkStat?.isSymbolicLink() === true && resolve(dirname(snapshot), await readlink(snapshot)) === blob;
    const placed =
      linkStat !== undefined && !pointsAtBlob ? await stat(snapshot).catch(() => undefined) : undefined;
    if (placed?.isFile() === true) {
      const problem = await this.#check(snapshot, placed, target);
      if (problem === undefined) return { kind: 'file', path: snapshot };
      this.#log.warn(
        { path: snapshot, source: target.origin.source, file: target.file.path },
        `the file at ${snapshot} (placed by hand) ${problem}: it is left as it is, and the mirror fetches ${target.file.path} from upstream into ${blob} and serves that`,
      );
    }
    return { kind: 'fill', fill: this.#fill(target) };
  }

  /** Why the file at `path` is not the target's bytes, or undefined when it is (checked once per size and mtime). */
  async #check(path: string, st: Stats, target: Target): Promise<string | undefined> {
    const memo = `${st.size}:${st.mtimeMs}`;
    if (this.#verified.get(path) === memo) return undefined;
    if (st.size !== target.size) return `is ${st.size} bytes where ${target.size} were expected`;
    const digest = digestOf(target.file);
    if (digest !== undefined) {
      const what = digest.algorithm === 'sha256' ? 'sha256' : 'git blob id';
      this.#log.info({ path }, `checking the ${what} of ${path} before the mirror serves it`);
      const found = await fileDigest(path, digest.algorithm, target.size);
      if (found !== digest.hex) return `does not match its ${what}: expected ${digest.hex}, found ${found}`;
    }
    this.#verified.set(path, memo);
    return undefined;
  }

  /** Starts the one fetch of a blob; readers tail its file until it ends. */
  #fill(target: Target): Fill {
    const fill = new Fill({ size: target.size, part: incompletePath(target.blob), blob: target.blob });
    this.#fills.set(target.key, fill);
    const hub = this.#o.hub();
    const url = hubFileUrl(hub.endpoint, target.origin, target.file);
    // The token goes to the hub only: never to a URL source (fetchFile keeps it from redirects' hosts).
    const token = target.origin.kind === 'hf' ? hub.token : undefined;
    const started = Date.now();
    const upstream = this.#o.upstream ?? {};
    const digest = digestOf(target.file);
    const fetchOnce = () =>
      fetchFile({
        url,
        ...(token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } }),
        dest: target.blob,
        size: target.size,
        ...(digest === undefined ? {} : { digest }),
        // One connection: what it reports done is the contiguous prefix readers can be given.
        connections: 1,
        retries: upstream.retries ?? 3,
        retryBaseMs: upstream.retryBaseMs ?? 500,
        ...(upstream.stallMs === undefined ? {} : { stallMs: upstream.stallMs }),
        onProgress: (bytes) => {
          fill.progress(bytes);
        },
        signal: fill.abort.signal,
        ...(this.#o.fetch === undefined ? {} : { fetch: this.#o.fetch }),
      });
    const run = async () => {
      if (this.#closed) throw new Error('the control plane is stopping');
      try {
        await fetchOnce();
      } catch (e) {
        if (!(e instanceof DigestMismatchError)) throw e;
        // Fetched again once; readers already given the bad bytes are cut off (Fill.generation).
        this.#log.warn({ url }, `${messageOf(e)} (${target.file.path} of ${target.origin.source})`);
        fill.progress(0);
        await fetchOnce();
      }
      const st = await stat(target.blob);
      this.#verified.set(target.blob, `${st.size}:${st.mtimeMs}`);
      await this.#ensureLinked(target);
    };
    this.#log.info(
      { url, size: target.size },
      `the mirror fetches ${target.file.path} of ${target.origin.source}`,
    );
    fill.settled = run().then(
      () => {
        this.#fills.delete(target.key);
        fill.complete();
        const seconds = (Date.now() - started) / 1000;
        this.#log.info(
          { url, size: target.size, seconds },
          `the mirror holds ${target.file.path} of ${target.origin.source} (${target.size} bytes in ${seconds.toFixed(1)} s)`,
        );
      },
      (e: unknown) => {
        this.#fills.delete(target.key);
        const why = scrub(messageOf(e), token);
        fill.fail(
          new LlmgwError(
            'bad_gateway',
            `the mirror could not fetch ${target.file.path} of ${target.origin.source} from ${url}: ${why}`,
          ),
        );
        this.#log.warn(
          { url },
          `the mirror could not fetch ${target.file.path} of ${target.origin.source}: ${why}`,
        );
      },
    );
    return fill;
  }

  /** The snapshot's link to the blob and the revision's ref, so the mirror reads as a Hugging Face cache. */
  async #ensureLinked(target: Target): Promise<void> {
    if (this.#linked.has(target.key)) return;
    try {
      await mkdir(dirname(target.snapshot), { recursive: true });
      const st = await lstat(target.snapshot).catch(() => undefined);
      if (st?.isSymbolicLink() === true && (await readlink(target.snapshot)) !== target.link) {
        await rm(target.snapshot, { force: true });
      }
      // A file placed there by hand stays (its check said what the mirror does instead).
      if (st === undefined || st.isSymbolicLink()) {
        await symlink(target.link, target.snapshot).catch((e: unknown) => {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        });
      }
      const ref = target.layout.ref;
      if (ref !== undefined) {
        const now = await readFile(ref.path, 'utf8').catch(() => undefined);
        if (now?.trim() !== ref.commit) {
          await mkdir(dirname(ref.path), { recursive: true });
          await writeFile(ref.path, ref.commit);
        }
      }
      this.#linked.add(target.key);
    } catch (e) {
      // Serving goes on from the blob; only the cache's snapshot view is missing.
      this.#log.warn(
        { path: target.snapshot },
        `could not link ${target.snapshot} to its blob: ${messageOf(e)} (the mirror serves the file all the same)`,
      );
    }
  }
}

/** An upstream error's text without the hub token or other secrets. */
function scrub(message: string, token: string | undefined): string {
  const plain = token === undefined || token === '' ? message : message.split(token).join('[token]');
  return redact(plain);
}
