/**
 * A model's origin: the files a source resolved to, pinned (a hub commit, a URL's ETag), with
 * their sizes and digests. Stored with the model, sent to agents, and the key of every cached file.
 */
import { z } from 'zod';

export const originFileSchema = z.object({
  /** Inside the repository (hf), the URL's file name (url), or relative to the directory (path). */
  path: z.string().min(1),
  size: z.number().int().nonnegative(),
  /** The LFS oid of a hub file: the sha256 of its bytes. */
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  /** The git blob id of a small hub file (sha1 of `blob SIZE\0` + bytes), or a URL's ETag. */
  etag: z.string().min(1).optional(),
});

export const originSchema = z.object({
  source: z.string().min(1),
  kind: z.enum(['hf', 'url', 'path']),
  repo: z.string().optional(),
  /** hf: the revision asked for (default main); url: its ETag, when it has one; path: empty. */
  revision: z.string(),
  /** hf: the commit the revision pointed at when resolved. */
  commit: z
    .string()
    .regex(/^[0-9a-f]{40}$/)
    .optional(),
  files: z.array(originFileSchema).min(1),
});

export type OriginFile = z.output<typeof originFileSchema>;
export type Origin = z.output<typeof originSchema>;
