/**
 * Where a model's files lie in a cache: the Hugging Face hub cache layout, so a cache filled by
 * huggingface_hub (or by hand) is read as it is, and vLLM or SGLang read ours offline
 * (HF_HUB_CACHE pointed at the root):
 *
 *   ROOT/models--ORG--REPO/blobs/<sha256, or the git blob id of a small file>
 *   ROOT/models--ORG--REPO/snapshots/<commit>/<path>  -> ../../blobs/<key> (relative symlink)
 *   ROOT/models--ORG--REPO/refs/<revision>            (the commit, when the revision is a name)
 *
 * A URL source is kept the same way under `urls--<digest of the URL>`, its snapshot named by its
 * ETag's digest. A local path is never copied. Pure: paths only, nothing touches the disk here.
 */
import { createHash } from 'node:crypto';
import { join, posix } from 'node:path';
import type { Origin, OriginFile } from './origin.js';

/** Where, under a cache root, one origin's files lie; undefined for a local path (used in place). */
export interface OriginLayout {
  /** ROOT/models--ORG--REPO (or ROOT/urls--DIGEST). */
  repoDir: string;
  /** The snapshot directory engines are given: ROOT/.../snapshots/<commit>. */
  snapshotDir: string;
  /** The ref file to write (hf, when the revision is a branch or tag), and what it holds. */
  ref?: { path: string; commit: string };
}

const short = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** The cache folder name of a hub repository, as huggingface_hub names it. */
export function repoFolderName(repo: string): string {
  return `models--${repo.split('/').join('--')}`;
}

export function originLayout(root: string, origin: Origin): OriginLayout | undefined {
  if (origin.kind === 'path') return undefined;
  if (origin.kind === 'hf') {
    if (origin.repo === undefined || origin.commit === undefined) {
      throw new Error(`the origin of ${origin.source} has no repository or commit`);
    }
    const repoDir = join(root, repoFolderName(origin.repo));
    const snapshotDir = join(repoDir, 'snapshots', origin.commit);
    return origin.revision === origin.commit
      ? { repoDir, snapshotDir }
      : {
          repoDir,
          snapshotDir,
          ref: { path: join(repoDir, 'refs', origin.revision), commit: origin.commit },
        };
  }
  const repoDir = join(root, `urls--${short(origin.source)}`);
  return { repoDir, snapshotDir: join(repoDir, 'snapshots', short(origin.revision)) };
}

/**
 * The name of a file's blob: its sha256 (LFS files), its git blob id (small hub files), or for a
 * URL a digest of its address and ETag (nothing better is known before it is read).
 */
export function blobKey(origin: Pick<Origin, 'source' | 'revision'>, file: OriginFile): string {
  if (file.sha256 !== undefined) return file.sha256;
  if (file.etag !== undefined && /^[0-9a-f]{40}$/.test(file.etag)) return file.etag;
  return short(`${origin.source}\n${origin.revision}\n${file.path}`).padEnd(40, '0');
}

/** Both paths of one file of an origin: the blob holding its bytes, and its name in the snapshot. */
export function filePaths(layout: OriginLayout, origin: Origin, file: OriginFile) {
  const blob = join(layout.repoDir, 'blobs', blobKey(origin, file));
  const snapshot = join(layout.snapshotDir, ...file.path.split('/'));
  // From snapshots/<commit>/<dirs...>/<name> up to the repo folder, then into blobs.
  const depth = file.path.split('/').length + 1;
  const link = posix.join(...Array<string>(depth).fill('..'), 'blobs', blobKey(origin, file));
  return { blob, snapshot, link };
}

/** A blob being fetched: the bytes so far (and, for parts fetched at once, their state beside it). */
export function incompletePath(blob: string): string {
  return `${blob}.incomplete`;
}

/** How a file's bytes are checked once fetched: sha256, the git blob id (sha1), or only its size. */
export function digestOf(file: OriginFile): { algorithm: 'sha256' | 'git-sha1'; hex: string } | undefined {
  if (file.sha256 !== undefined) return { algorithm: 'sha256', hex: file.sha256 };
  if (file.etag !== undefined && /^[0-9a-f]{40}$/.test(file.etag))
    return { algorithm: 'git-sha1', hex: file.etag };
  return undefined;
}

/** The hub's address of one file at the pinned commit (it answers with a redirect to the bytes). */
export function hubFileUrl(endpoint: string, origin: Origin, file: OriginFile): string {
  if (origin.kind === 'url') return origin.source;
  if (origin.kind !== 'hf' || origin.repo === undefined || origin.commit === undefined) {
    throw new Error(`${origin.source} is not fetched from the hub`);
  }
  const path = file.path.split('/').map(encodeURIComponent).join('/');
  return `${endpoint.replace(/\/+$/, '')}/${origin.repo}/resolve/${origin.commit}/${path}`;
}
