import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** How a file's bytes are checked: its sha256 (LFS files), or its git blob id (small hub files). */
export interface Digest {
  algorithm: 'sha256' | 'git-sha1';
  hex: string;
}

/** The digest of a file's bytes, of the same kind as `algorithm`; `size` is its length (git's header). */
export async function fileDigest(
  path: string,
  algorithm: Digest['algorithm'],
  size: number,
): Promise<string> {
  const hash = createHash(algorithm === 'sha256' ? 'sha256' : 'sha1');
  // A git blob id is the sha1 of `blob SIZE\0` followed by the bytes.
  if (algorithm === 'git-sha1') hash.update(`blob ${size}\0`);
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
