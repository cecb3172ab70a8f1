// Helpers of the download bench, exported for other benches (the mirror's, with 8 agents):
// a file server with Range support in its own process (so it never shares an event loop with
// the client measured), curl as the baseline client, and a large file made quickly.
//
// Run as a program, it is the server: `node bench/download-server.mjs FILE` prints
// `{"port":N}` on its first line, then one JSON line per request ({"range": ...}).
import { spawn } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { createReadStream, openSync, statSync, writeSync, closeSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);

/** Serves FILE at every path, answering `Range: bytes=a-b` / `bytes=a-` with 206, as the hub's CDN does. */
function serve(file) {
  const size = statSync(file).size;
  const server = createServer((req, res) => {
    process.stdout.write(`${JSON.stringify({ range: req.headers.range ?? null })}\n`);
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    let start = 0;
    let end = size - 1;
    if (m) {
      start = Number(m[1]);
      end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
      if (start > end) {
        res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
        return;
      }
      res.writeHead(206, {
        'content-length': end - start + 1,
        'content-range': `bytes ${start}-${end}/${size}`,
        'accept-ranges': 'bytes',
      });
    } else {
      res.writeHead(200, { 'content-length': size, 'accept-ranges': 'bytes' });
    }
    createReadStream(file, { start, end, highWaterMark: 1024 * 1024 }).pipe(res);
  });
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
  });
}

/** Starts the server on `file` in a child process: { url, ranges (every request's Range so far), close }. */
export async function startFileServer(file) {
  const child = spawn(process.execPath, [self, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ranges = [];
  const lines = createInterface({ input: child.stdout });
  const port = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the file server exited (${code})`)));
    lines.on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.port !== undefined) resolve(msg.port);
      else ranges.push(msg.range);
    });
  });
  return {
    url: `http://127.0.0.1:${port}/file`,
    ranges,
    close: () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill();
      }),
  };
}

/** `curl -s -o out url`: { seconds, bytes, cpuSeconds } (curl's user + system time, read by bash's `times`). */
export function curlDownload(url, out) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('bash', ['-c', 'curl -s -f -o "$1" "$2" || exit $?; times', 'curl', out, url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let text = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (t) => (text += t));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) {
        reject(new Error(`curl exited ${code}`));
        return;
      }
      resolve({
        seconds: (performance.now() - started) / 1000,
        bytes: statSync(out).size,
        cpuSeconds: childSeconds(text),
      });
    });
  });
}

/**
 * The sha256 of a file as a person checks a download, with the fastest tool at hand:
 * `openssl dgst -sha256` (it uses the CPU's SHA instructions; coreutils' sha256sum may not,
 * at a quarter of the speed). { seconds, cpuSeconds, hex }.
 */
export function sha256sum(file) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const script =
      'if command -v openssl >/dev/null; then openssl dgst -sha256 -r "$1"; else sha256sum "$1"; fi || exit $?; times';
    const child = spawn('bash', ['-c', script, 'sha256', file], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let text = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (t) => (text += t));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`sha256sum exited ${code}`));
      else
        resolve({
          seconds: (performance.now() - started) / 1000,
          cpuSeconds: childSeconds(text),
          hex: text.split(' ')[0],
        });
    });
  });
}

/** The children's user + system seconds from bash's `times` (its last line: "0m0.010s 0m0.310s"). */
function childSeconds(text) {
  const line = text.trim().split('\n').at(-1) ?? '';
  return [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, m) => sum + Number(m[1]) * 60 + Number(m[2]), 0);
}

/** Writes `bytes` of random-looking data (a 64 MiB random block, repeated) and returns its sha256. */
export function makeFile(path, bytes) {
  const block = randomFillSync(Buffer.allocUnsafe(64 * 1024 * 1024));
  const hash = createHash('sha256');
  const fd = openSync(path, 'w');
  try {
    for (let at = 0; at < bytes; at += block.length) {
      const piece = block.subarray(0, Math.min(block.length, bytes - at));
      // Each block differs in its first bytes, so no two are the same.
      piece.writeUInt32LE(at / block.length, 0);
      writeSync(fd, piece);
      hash.update(piece);
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

if (process.argv[1] === self) serve(process.argv[2]);
