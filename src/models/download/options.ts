import type { DigestAlgorithm } from './digester.js';
import type { Wording } from './wording.js';

export type FileDigest = { algorithm: DigestAlgorithm; hex: string };

export interface FetchFileOptions {
  /** GET; redirects followed (the hub redirects to a CDN). */
  url: string;
  /** Sent only to url's own origin, never after a redirect to another origin (a token stays with the hub). */
  headers?: Record<string, string>;
  /** The blob path: bytes go to incompletePath(dest), renamed to dest once verified. */
  dest: string;
  /**
   * Expected bytes. Unknown (an engine's archive): one connection, and the size the answer
   * gives (Content-Length, or Content-Range's total) is the one checked.
   */
  size?: number;
  /** What messages call the file (default: dest's name, a digest); say the origin's path instead. */
  name?: string;
  /** git-sha1 = sha1("blob <size>\0" + bytes), the git blob id of a small hub file. Without `hex`, taken and returned, not checked. */
  digest?: { algorithm: DigestAlgorithm; hex?: string };
  /** Parallel ranges; default 1 below 64 MB, else up to 8 parts of at least 32 MB. */
  connections?: number;
  /** No byte for this long: that connection is dropped and retried (default 30 s). */
  stallMs?: number;
  /** Tries after the first, per part (default 6); the count starts again once a try made progress. */
  retries?: number;
  /** First backoff (default 1 s), doubled per failure up to retryMaxMs (default 30 s). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /**
   * Total bytes on disk so far, resumed ones included; with one connection also the contiguous
   * prefix. `size` is the file's, once known.
   */
  onProgress?: (bytesDone: number, size: number | undefined) => void;
  signal?: AbortSignal;
  /** Injected (tests, a proxy-aware fetch); by default a plain HTTP/1.1 client over node:net/tls (http-get.ts), at half node:http's CPU per byte. */
  fetch?: typeof fetch;
  /** How failures are said (default: a model file's words, fileWording). */
  wording?: Wording;
}

/** What a fetch brought: the file's size, and its digest when one was asked for. */
export interface FetchedFile {
  bytes: number;
  hex: string | undefined;
}
