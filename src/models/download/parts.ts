import { readFile, rename, writeFile } from 'node:fs/promises';
import { z } from 'zod';

const MB = 1024 * 1024;

/** A byte range of the file, fetched over one connection at a time. */
export interface Part {
  start: number;
  /** Exclusive; Infinity while the file's size is not known yet (no size given, no answer read). */
  end: number;
  /** Bytes of [start, end) on disk. */
  done: number;
}

/** The default split: one connection below 64 MB, else up to 8 parts of at least 32 MB. */
export function defaultConnections(size: number): number {
  if (size < 64 * MB) return 1;
  return Math.max(1, Math.min(8, Math.floor(size / (32 * MB))));
}

export function splitParts(from: number, size: number, n: number): Part[] {
  const parts: Part[] = [];
  const each = Math.ceil((size - from) / n);
  for (let start = from; start < size; start += each)
    parts.push({ start, end: Math.min(size, start + each), done: 0 });
  return parts;
}

/** Where the bytes on disk stop being contiguous from byte 0. */
export function contiguous(parts: Part[]): number {
  let end = 0;
  for (const p of [...parts].sort((a, b) => a.start - b.start)) {
    if (p.start > end) break;
    end = p.start + p.done;
    if (p.start + p.done < p.end) break;
  }
  return end;
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

/** The parts saved beside a file fetched over several connections, if they are whole and of this size. */
export async function readParts(path: string, size: number): Promise<Part[] | undefined> {
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

export async function saveParts(path: string, size: number, parts: Part[]): Promise<void> {
  // Written beside and renamed over, so a crash never leaves half a JSON.
  await writeFile(`${path}.tmp`, JSON.stringify({ size, parts }));
  await rename(`${path}.tmp`, path);
}
