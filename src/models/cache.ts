/**
 * What a cache root holds, and making room in it: listing each origin's snapshot (a cache made
 * by huggingface_hub reads the same as ours), evicting blobs least recently used first (those of
 * no catalog model before the others, never one in use), and purging one origin.
 */
import { lstat, readdir, readFile, readlink, rm, rmdir, stat } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { blobKey, filePaths, incompletePath, originLayout } from './cache-layout.js';
import type { Origin } from './origin.js';

/** One origin's snapshot in a cache; the fields of the agent protocol's cacheEntrySchema, plus snapshotDir. */
export interface CacheListing {
  /** hf://ORG/REPO, or the URL (`urls--DIGEST` when no `source` file says it). */
  source: string;
  /** The snapshot's name: a hub commit, or a digest of a URL's ETag. */
  snapshot: string;
  models: string[];
  files: number;
  bytes: number;
  last_used?: string;
  incomplete_bytes?: number;
  snapshotDir: string;
}

/** A URL origin's folder keeps its address here (its folder name is only a digest of it). */
export const urlSourceFile = 'source';

interface SnapshotFile {
  path: string;
  /** The blob a link points at; undefined for a real file placed in the snapshot. */
  blob?: string;
  bytes: number;
}

interface Snapshot {
  name: string;
  dir: string;
  mtimeMs: number;
  files: SnapshotFile[];
}

interface Blob {
  path: string;
  key: string;
  bytes: number;
  mtimeMs: number;
}

interface Repo {
  dir: string;
  source: string;
  snapshots: Snapshot[];
  blobs: Map<string, Blob>;
  incomplete: number;
}

const isMissing = (e: unknown) => (e as NodeJS.ErrnoException).code === 'ENOENT';

async function list(dir: string) {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch (e) {
    if (isMissing(e) || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
    throw e;
  }
}

async function walkSnapshot(dir: string, under = ''): Promise<SnapshotFile[]> {
  const out: SnapshotFile[] = [];
  for (const e of await list(dir)) {
    const path = join(dir, e.name);
    const rel = under === '' ? e.name : `${under}/${e.name}`;
    if (e.isDirectory()) out.push(...(await walkSnapshot(path, rel)));
    else if (e.isSymbolicLink()) {
      const blob = resolve(dirname(path), await readlink(path));
      try {
        out.push({ path: rel, blob, bytes: (await stat(blob)).size });
      } catch (err) {
        // A link whose blob was removed: the file is not there.
        if (!isMissing(err)) throw err;
      }
    } else if (e.isFile()) out.push({ path: rel, bytes: (await lstat(path)).size });
  }
  return out;
}

/** `models--ORG--REPO` -> hf://ORG/REPO (huggingface_hub forbids `--` inside names, so the split is exact). */
function hubSource(folder: string): string {
  return `hf://${folder.slice('models--'.length).split('--').join('/')}`;
}

async function scan(root: string): Promise<Repo[]> {
  const repos: Repo[] = [];
  for (const e of await list(root)) {
    if (!e.isDirectory()) continue;
    const isHub = e.name.startsWith('models--');
    if (!isHub && !e.name.startsWith('urls--')) continue;
    const dir = join(root, e.name);
    let source = isHub ? hubSource(e.name) : e.name;
    if (!isHub) {
      try {
        source = (await readFile(join(dir, urlSourceFile), 'utf8')).trim() || source;
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
    }
    const blobs = new Map<string, Blob>();
    let incomplete = 0;
    for (const b of await list(join(dir, 'blobs'))) {
      if (!b.isFile()) continue;
      const path = join(dir, 'blobs', b.name);
      const s = await lstat(path);
      if (b.name.endsWith('.incomplete')) {
        // Blocks, not length: a blob fetched in parts is sparse at its full size.
        incomplete += Math.min(s.size, s.blocks * 512);
      } else if (!b.name.includes('.')) {
        blobs.set(path, { path, key: b.name, bytes: s.size, mtimeMs: s.mtimeMs });
      }
    }
    const snapshots: Snapshot[] = [];
    for (const s of await list(join(dir, 'snapshots'))) {
      if (!s.isDirectory()) continue;
      const sdir = join(dir, 'snapshots', s.name);
      snapshots.push({
        name: s.name,
        dir: sdir,
        mtimeMs: (await stat(sdir)).mtimeMs,
        files: await walkSnapshot(sdir),
      });
    }
    repos.push({ dir, source, snapshots, blobs, incomplete });
  }
  for (const r of repos) r.snapshots.sort((a, b) => a.name.localeCompare(b.name));
  return repos.sort((a, b) => a.dir.localeCompare(b.dir));
}

/** Each origin's snapshot under root, with its models, files, bytes, when last used and what is still arriving. */
export async function listCache(
  root: string,
  opts: { modelsByBlob?: Map<string, string[]>; lastUsed?: Map<string, number> } = {},
): Promise<CacheListing[]> {
  const out: CacheListing[] = [];
  for (const repo of await scan(root)) {
    // Bytes still arriving belong to the snapshot being filled: the newest.
    const newest = repo.snapshots.reduce<Snapshot | undefined>(
      (a, s) => (a === undefined || s.mtimeMs > a.mtimeMs ? s : a),
      undefined,
    );
    for (const s of repo.snapshots) {
      const models = new Set<string>();
      const blobsSeen = new Set<string>();
      let bytes = 0;
      let fetchedAt = 0;
      for (const f of s.files) {
        const blob = f.blob === undefined ? undefined : repo.blobs.get(f.blob);
        if (blob !== undefined) {
          for (const m of opts.modelsByBlob?.get(blob.key) ?? []) models.add(m);
          fetchedAt = Math.max(fetchedAt, blob.mtimeMs);
        }
        // A blob linked twice in one snapshot takes its room once.
        if (f.blob !== undefined && blobsSeen.has(f.blob)) continue;
        if (f.blob !== undefined) blobsSeen.add(f.blob);
        bytes += f.bytes;
      }
      const used = opts.lastUsed?.get(s.dir) ?? (fetchedAt > 0 ? fetchedAt : undefined);
      const entry: CacheListing = {
        source: repo.source,
        snapshot: s.name,
        models: [...models].sort(),
        files: s.files.length,
        bytes,
        snapshotDir: s.dir,
      };
      if (used !== undefined) entry.last_used = new Date(used).toISOString();
      if (s === newest && repo.incomplete > 0) entry.incomplete_bytes = repo.incomplete;
      out.push(entry);
    }
  }
  return out;
}

export interface EvictOptions {
  maxBytes: number;
  /** Blob keys a running engine (or a download) uses: never removed. */
  inUse: Set<string>;
  /** Blob keys of models in the catalog: removed only after every other blob. */
  catalogBlobs: Set<string>;
  /** snapshotDir -> when an engine last started on it (ms); a blob's is the latest of its snapshots'. */
  lastUsed?: Map<string, number>;
}

export interface EvictResult {
  /** Paths relative to the root. */
  removed: { blob: string; bytes: number }[];
  freed: number;
  /** Bytes over maxBytes that could not be removed (in use, or placed by hand). */
  still_over?: number;
}

/** Removes a snapshot's file, then every directory it leaves empty up to and including the snapshot. */
async function removeFromSnapshot(snapshotDir: string, path: string): Promise<void> {
  const full = join(snapshotDir, ...path.split('/'));
  await rm(full, { force: true });
  for (let dir = dirname(full); dir.startsWith(snapshotDir); dir = dirname(dir)) {
    try {
      await rmdir(dir);
    } catch {
      return; // not empty
    }
    if (dir === snapshotDir) return;
  }
}

/** After removals: refs to snapshots gone, and a repository folder left with nothing in it. */
async function tidyRepo(repo: Repo): Promise<void> {
  const left = new Set((await list(join(repo.dir, 'snapshots'))).map((e) => e.name));
  const refsDir = join(repo.dir, 'refs');
  const refs = async (dir: string): Promise<void> => {
    for (const e of await list(dir)) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await refs(p);
      else if (e.isFile() && !left.has((await readFile(p, 'utf8')).trim())) await rm(p, { force: true });
    }
    if (dir !== refsDir) await rmdir(dir).catch(() => undefined);
  };
  await refs(refsDir);
  const blobs = await list(join(repo.dir, 'blobs'));
  if (left.size === 0 && blobs.length === 0) await rm(repo.dir, { recursive: true, force: true });
}

/**
 * Removes blobs until the cache holds at most maxBytes: first those of no catalog model, least
 * recently used first, then catalog ones in the same order; never one in use. Links to a removed
 * blob go with it, and snapshot folders left empty.
 */
export async function evictCache(root: string, opts: EvictOptions): Promise<EvictResult> {
  const repos = await scan(root);
  let total = 0;
  const candidates: { blob: Blob; repo: Repo; used: number; catalog: boolean }[] = [];
  for (const repo of repos) {
    total += repo.incomplete;
    for (const s of repo.snapshots) for (const f of s.files) if (f.blob === undefined) total += f.bytes;
    for (const blob of repo.blobs.values()) {
      total += blob.bytes;
      if (opts.inUse.has(blob.key)) continue;
      let used = blob.mtimeMs;
      for (const s of repo.snapshots) {
        const at = opts.lastUsed?.get(s.dir);
        if (at !== undefined && s.files.some((f) => f.blob === blob.path)) used = Math.max(used, at);
      }
      candidates.push({ blob, repo, used, catalog: opts.catalogBlobs.has(blob.key) });
    }
  }
  candidates.sort(
    (a, b) =>
      Number(a.catalog) - Number(b.catalog) ||
      a.used - b.used ||
      b.blob.bytes - a.blob.bytes ||
      a.blob.path.localeCompare(b.blob.path),
  );
  const removed: EvictResult['removed'] = [];
  let freed = 0;
  const touched = new Set<Repo>();
  for (const c of candidates) {
    if (total - freed <= opts.maxBytes) break;
    for (const s of c.repo.snapshots) {
      for (const f of s.files) if (f.blob === c.blob.path) await removeFromSnapshot(s.dir, f.path);
    }
    await rm(c.blob.path, { force: true });
    removed.push({ blob: relative(root, c.blob.path).split(sep).join('/'), bytes: c.blob.bytes });
    freed += c.blob.bytes;
    touched.add(c.repo);
  }
  for (const repo of touched) await tidyRepo(repo);
  const over = total - freed - opts.maxBytes;
  return over > 0 ? { removed, freed, still_over: over } : { removed, freed };
}

export interface PurgeResult {
  /** Paths relative to the root. */
  removed: { path: string; bytes: number }[];
  kept: { path: string; reason: string }[];
  freed: number;
}

/**
 * Removes an origin's snapshot, and each of its blobs (with any partial of it) that no other
 * snapshot links and nothing uses; says what it kept and why.
 */
export async function purgeOrigin(root: string, origin: Origin, inUse: Set<string>): Promise<PurgeResult> {
  const result: PurgeResult = { removed: [], kept: [], freed: 0 };
  const layout = originLayout(root, origin);
  if (layout === undefined) return result;
  const rel = (p: string) => relative(root, p).split(sep).join('/');
  const repo = (await scan(root)).find((r) => r.dir === layout.repoDir);
  if (repo === undefined) return result;
  const snapshot = repo.snapshots.find((s) => s.dir === layout.snapshotDir);
  const blobs = new Map<string, string>();
  for (const f of origin.files) blobs.set(filePaths(layout, origin, f).blob, blobKey(origin, f));
  for (const f of snapshot?.files ?? []) {
    if (f.blob !== undefined) blobs.set(f.blob, basename(f.blob));
    else {
      // Placed by hand in the snapshot: this origin's alone.
      result.removed.push({ path: rel(join(layout.snapshotDir, f.path)), bytes: f.bytes });
      result.freed += f.bytes;
    }
  }
  if (snapshot !== undefined) await rm(snapshot.dir, { recursive: true, force: true });
  for (const [path, key] of blobs) {
    const other = repo.snapshots.find((s) => s !== snapshot && s.files.some((g) => g.blob === path));
    const here = repo.blobs.get(path);
    const partial = incompletePath(path);
    const partialBytes = await sizeOnDisk(partial);
    if (here === undefined && partialBytes === undefined) continue;
    if (other !== undefined) {
      result.kept.push({ path: rel(path), reason: `snapshot ${other.name} uses it too` });
    } else if (inUse.has(key)) {
      result.kept.push({ path: rel(path), reason: 'a running engine or download uses it' });
    } else {
      if (here !== undefined) {
        await rm(path, { force: true });
        result.removed.push({ path: rel(path), bytes: here.bytes });
        result.freed += here.bytes;
      }
      if (partialBytes !== undefined) {
        await rm(partial, { force: true });
        await rm(`${partial}.parts`, { force: true });
        result.removed.push({ path: rel(partial), bytes: partialBytes });
        result.freed += partialBytes;
      }
    }
  }
  await tidyRepo(repo);
  return result;
}

/** Bytes a file takes on disk (a sparse one counts its blocks); undefined when absent. */
async function sizeOnDisk(path: string): Promise<number | undefined> {
  try {
    const s = await lstat(path);
    return Math.min(s.size, s.blocks * 512);
  } catch (e) {
    if (isMissing(e)) return undefined;
    throw e;
  }
}
