/**
 * The mirror's directory as files: what each snapshot holds (ctl cache), and the walks that
 * purging needs. The directory is a Hugging Face cache (src/models/cache-layout.ts).
 */
import { readdir, readlink, rmdir, stat } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';

import { blobKey, originLayout } from '../../models/cache-layout.js';
import type { Origin } from '../../models/origin.js';
import type { CacheEntry } from '../../protocol/agent-protocol.js';

export interface MirrorListing {
  /** The mirror's root. */
  dir: string;
  /** The origins to name snapshots by, with the catalog's model of each where there is one. */
  origins: readonly { origin: Origin; model?: string }[];
  /** When each snapshot's files were last served. */
  lastServed: ReadonlyMap<string, number>;
}

/** What the mirror holds, one entry per snapshot, by source and snapshot. */
export async function listMirror({ dir, origins, lastServed }: MirrorListing): Promise<CacheEntry[]> {
  const bySnapshot = new Map<string, { source: string; models: string[] }>();
  const snapshotOfBlob = new Map<string, string>();
  const note = (origin: Origin, model?: string) => {
    const layout = originLayout(dir, origin);
    if (layout === undefined) return;
    const entry = bySnapshot.get(layout.snapshotDir) ?? { source: origin.source, models: [] };
    if (model !== undefined && !entry.models.includes(model)) entry.models.push(model);
    bySnapshot.set(layout.snapshotDir, entry);
    for (const f of origin.files)
      snapshotOfBlob.set(join(layout.repoDir, 'blobs', blobKey(origin, f)), layout.snapshotDir);
  };
  for (const o of origins) note(o.origin, o.model);

  const entries = new Map<string, CacheEntry>();
  const entryOf = (repo: string, snapshotDir: string): CacheEntry => {
    let entry = entries.get(snapshotDir);
    if (entry === undefined) {
      const named = bySnapshot.get(snapshotDir);
      entry = {
        source: named?.source ?? sourceOfFolder(repo),
        snapshot: snapshotDir.split(/[\\/]/).pop() ?? '',
        models: named?.models ?? [],
        files: 0,
        bytes: 0,
      };
      entries.set(snapshotDir, entry);
    }
    return entry;
  };
  const used = (entry: CacheEntry, at: number) => {
    if (entry.last_used === undefined || Date.parse(entry.last_used) < at)
      entry.last_used = new Date(at).toISOString();
  };

  for (const repo of await names(dir)) {
    if (!repo.startsWith('models--') && !repo.startsWith('urls--')) continue;
    const repoDir = join(dir, repo);
    for (const snap of await names(join(repoDir, 'snapshots'))) {
      const snapshotDir = join(repoDir, 'snapshots', snap);
      const entry = entryOf(repo, snapshotDir);
      for (const file of await filesUnder(snapshotDir)) {
        const st = await stat(file).catch(() => undefined);
        if (!st?.isFile()) continue;
        entry.files++;
        entry.bytes += st.size;
        used(entry, st.mtimeMs);
      }
      const served = lastServed.get(snapshotDir);
      if (served !== undefined) used(entry, served);
    }
    for (const name of await names(join(repoDir, 'blobs'))) {
      if (!name.endsWith('.incomplete')) continue;
      const part = join(repoDir, 'blobs', name);
      const snapshotDir = snapshotOfBlob.get(part.slice(0, -'.incomplete'.length));
      const st = await stat(part).catch(() => undefined);
      if (snapshotDir === undefined || st === undefined) continue;
      const entry = entryOf(repo, snapshotDir);
      entry.incomplete_bytes = (entry.incomplete_bytes ?? 0) + st.size;
      used(entry, st.mtimeMs);
    }
  }
  return [...entries.values()].sort(
    (a, b) => a.source.localeCompare(b.source) || a.snapshot.localeCompare(b.snapshot),
  );
}

/** hf://ORG/REPO from models--ORG--REPO; a URL's folder (whose address it does not keep) as it is. */
function sourceOfFolder(folder: string): string {
  if (folder.startsWith('models--')) return `hf://${folder.slice('models--'.length).split('--').join('/')}`;
  return folder;
}

async function names(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}

/** Every file and link under a directory. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(path)));
    else out.push(path);
  }
  return out;
}

/** Blob keys the snapshots other than `except` link to (a blob shared by two commits stays). */
export async function linkedBlobs(snapshotsDir: string, except: string): Promise<Set<string>> {
  const keys = new Set<string>();
  for (const snap of await names(snapshotsDir)) {
    const dir = join(snapshotsDir, snap);
    if (dir === except) continue;
    for (const path of await filesUnder(dir)) {
      const target = await readlink(path).catch(() => undefined);
      if (target !== undefined) keys.add(target.split('/').pop() ?? '');
    }
  }
  return keys;
}

/** Removes `dir` and its parents while they are empty, stopping below `stop`. */
export async function pruneEmpty(dir: string, stop: string): Promise<void> {
  let current = dir;
  while (current !== stop && relative(stop, current) !== '' && !relative(stop, current).startsWith('..')) {
    if ((await names(current)).length > 0) return;
    await rmdir(current).catch(() => undefined);
    current = dirname(current);
  }
}
