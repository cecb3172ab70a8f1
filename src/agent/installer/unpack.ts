import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

import { x } from 'tar';

/** What a downloaded file is, from its first bytes rather than its name (mirrors rename things). */
export type ArchiveKind = 'tar.gz' | 'tar' | 'zip' | 'unknown';

export async function archiveKind(file: string): Promise<ArchiveKind> {
  const fh = await open(file, 'r');
  try {
    const head = Buffer.alloc(512);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'tar.gz';
    if (bytesRead >= 4 && head.subarray(0, 4).equals(Buffer.from('PK\x03\x04', 'latin1'))) return 'zip';
    // POSIX tar: "ustar" at offset 257 of the first header.
    if (bytesRead >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'tar';
    return 'unknown';
  } finally {
    await fh.close();
  }
}

/**
 * Unpacks a (gzipped) tarball into `dir`, which must exist. node-tar refuses absolute
 * paths, `..` and writes through symlinks by default; strict turns a truncated archive
 * into an error instead of a warning and a half-unpacked tree.
 */
export async function unpackTarball(file: string, dir: string): Promise<void> {
  // Owners from the release machine mean nothing here, even when the agent runs as root.
  await x({ file, cwd: dir, strict: true, preserveOwner: false });
}

const MAX_DEPTH = 6;

/**
 * The shallowest regular file called `name` under `dir`: current tarballs hold
 * `llama-bNNNN/llama-server`, older archives `build/bin/llama-server`.
 */
export async function findFile(dir: string, name: string): Promise<string | undefined> {
  let level = [dir];
  for (let depth = 0; depth <= MAX_DEPTH && level.length > 0; depth++) {
    const next: string[] = [];
    for (const d of level) {
      const entries = await readdir(d, { withFileTypes: true });
      for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
        const path = join(d, e.name);
        if (e.isDirectory()) next.push(path);
        else if (
          e.name === name &&
          (await stat(path).then(
            (s) => s.isFile(),
            () => false,
          ))
        )
          return path;
      }
    }
    level = next;
  }
  return undefined;
}
