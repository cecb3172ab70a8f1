import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';

import { blockBytes } from './block-writer.js';

/** What a file's digest is taken with; git-sha1 = sha1("blob <size>\0" + bytes), the git blob id of a small hub file. */
export type DigestAlgorithm = 'sha256' | 'git-sha1';

/**
 * Follows the bytes on disk from byte 0 and says the file's digest once all are there. A large
 * file is hashed in a worker thread as its contiguous prefix grows, so the hashing overlaps the
 * download (and leaves the main thread to the network); a small one is read back at the end.
 */
export interface Digester {
  /** Bytes [0, upTo) are on disk. */
  advance(upTo: number): void;
  /** The hex digest, once the file's `size` bytes are on disk. */
  finish(size: number): Promise<string>;
  close(): Promise<void>;
}

const MB = 1024 * 1024;
/** Files this large get a hashing thread of their own. */
const workerDigestFrom = 16 * MB;
/** The thread's module: hash-worker.js beside this file, in src/ (the tests) as in dist/. */
const hashWorker = new URL('./hash-worker.js', import.meta.url);

/**
 * A digester for `path`, or none when no digest is asked for. `size` undefined: the file's size
 * is not known before its answer, so it is read back at the end.
 */
export function digester(
  path: string,
  algorithm: DigestAlgorithm | undefined,
  size: number | undefined,
): Promise<Digester | undefined> {
  if (algorithm === undefined) return Promise.resolve(undefined);
  return size !== undefined && size >= workerDigestFrom
    ? workerDigester(path, algorithm, size)
    : Promise.resolve(rereadDigester(path, algorithm));
}

async function workerDigester(path: string, algorithm: DigestAlgorithm, size: number): Promise<Digester> {
  // Opened here and closed here: a descriptor a worker opens outlives the worker.
  const file = await open(path, 'r');
  const worker = new Worker(hashWorker, {
    // --input-type speaks of string input: handed on to a thread that loads a file, Node refuses to start it.
    execArgv: process.execArgv.filter((a) => !a.startsWith('--input-type')),
    workerData: { fd: file.fd, algorithm, size },
  });
  worker.unref();
  const result = new Promise<string>((resolve, reject) => {
    worker.once('message', (hex: string) => resolve(hex));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the hashing thread stopped (${code})`)));
  });
  result.catch(() => undefined);
  let posted = 0;
  return {
    advance: (upTo) => {
      // Now and again, not per block: each message wakes the thread.
      if (upTo - posted < 8 * MB) return;
      posted = upTo;
      worker.postMessage(upTo);
    },
    finish: () => {
      worker.postMessage(size);
      worker.postMessage(-1);
      return result;
    },
    close: async () => {
      await worker.terminate();
      await file.close();
    },
  };
}

function rereadDigester(path: string, algorithm: DigestAlgorithm): Digester {
  return {
    advance: () => undefined,
    finish: async (size) => {
      const hash = newHash(algorithm, size);
      await hashFile(path, hash);
      return hash.digest('hex');
    },
    close: () => Promise.resolve(),
  };
}

function newHash(algorithm: DigestAlgorithm, size: number): Hash {
  if (algorithm === 'sha256') return createHash('sha256');
  return createHash('sha1').update(`blob ${size}\0`);
}

/** Reads a file back through its digest (after a fetch in parts, or a resumed prefix). */
async function hashFile(path: string, hash: Hash): Promise<void> {
  const stream = createReadStream(path, { highWaterMark: blockBytes });
  for await (const chunk of stream) hash.update(chunk as Buffer);
}
