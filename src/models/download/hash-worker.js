// @ts-check
/**
 * The hashing thread of a large download (see digester.ts): follows the bytes on disk from
 * byte 0 as the main thread says they land, and posts the hex digest once all `size` are hashed.
 * JavaScript, not TypeScript: a worker thread loads this file itself, from src/ under the tests
 * as from dist/ once built (tsconfig.build.json copies it), with nothing to compile it on the way.
 * Messages in: the offset the bytes on disk reach now, or -1 once the last has landed.
 */
import { createHash } from 'node:crypto';
import { readSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';

/** @type {{ fd: number, algorithm: 'sha256' | 'git-sha1', size: number }} */
const { fd, algorithm, size } = workerData;
const port = parentPort;
if (port === null) throw new Error('hash-worker.js runs as a worker thread only');
const hash = algorithm === 'sha256' ? createHash('sha256') : createHash('sha1').update(`blob ${size}\0`);
const buf = Buffer.allocUnsafe(4 * 1024 * 1024);
let at = 0;
let upTo = 0;
let finishing = false;
port.on('message', (/** @type {number} */ m) => {
  if (m < 0) finishing = true;
  else if (m > upTo) upTo = m;
  while (at < upTo) {
    const n = readSync(fd, buf, 0, Math.min(buf.length, upTo - at), at);
    if (n === 0) throw new Error(`the file ended at ${at} bytes`);
    hash.update(n === buf.length ? buf : buf.subarray(0, n));
    at += n;
  }
  if (finishing && at >= size) port.postMessage(hash.digest('hex'));
});
