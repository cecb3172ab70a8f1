#!/usr/bin/env node
// What llmgw's downloads cost: one large file served over HTTP on this machine, fetched by
// `curl -o` and by fetchFile (one connection, and the default split) in the same run; then a
// download killed in the middle (SIGKILL of the process) and resumed. Prints rates and ratios.
//
//   npm run bench:download         (npm run build && node bench/download.bench.mjs)
//   BENCH_DOWNLOAD_MB=2048         the file's size in MiB (default 2048; 256 for a quick run)
//   BENCH_ROUNDS=3                 runs of each client; the median is compared (default 3)
//   BENCH_DIR=/path                where the file and the copies go (default the OS temp dir)
//
// The server (bench/download-server.mjs, its own process), the client and the disk share one
// machine: the figures include writing every byte to disk, and fetchFile verifying the sha256.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus as cpuList, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { defaultConnections, fetchFile } from '../dist/models/download.js';
import { curlDownload, makeFile, sha256sum, startFileServer } from './download-server.mjs';

const MiB = 1024 * 1024;
const size = Math.round(Number(process.env.BENCH_DOWNLOAD_MB ?? 2048) * MiB);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'llmgw-bench-download-'));
const downloadJs = fileURLToPath(new URL('../dist/models/download.js', import.meta.url));

const rate = (bytes, seconds) => bytes / MiB / seconds;
const fmt = (n) => n.toFixed(0).padStart(6);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Bytes a Range header asks for (null: the whole file). */
function asked(range) {
  if (range === null) return size;
  const m = /^bytes=(\d+)-(\d*)$/.exec(range);
  return (m[2] === '' ? size - 1 : Number(m[2])) - Number(m[1]) + 1;
}

/** fetchFile in this process: { seconds, cpuSeconds } (this process's, its hashing thread's included). */
async function timeFetch(url, dest, options) {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await fetchFile({ url, dest, size, ...options });
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  if (statSync(dest).size !== size) throw new Error('fetchFile wrote the wrong size');
  return { seconds, cpuSeconds: (used.user + used.system) / 1e6 };
}

/** fetchFile in a child process, SIGKILLed once `killAt` bytes are on disk. */
function killedMidway(url, dest, digest, killAt, connections) {
  const script = `
    import { fetchFile } from ${JSON.stringify(downloadJs)};
    let last = 0;
    await fetchFile({ url: ${JSON.stringify(url)}, dest: ${JSON.stringify(dest)}, size: ${size}, connections: ${connections},
      digest: { algorithm: 'sha256', hex: ${JSON.stringify(digest)} },
      onProgress: (n) => { if (n - last >= ${4 * MiB}) { last = n; process.stdout.write(n + '\\n'); } } });
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let done = 0;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text) => {
      for (const line of text.split('\n')) if (line !== '') done = Number(line);
      if (done >= killAt) child.kill('SIGKILL');
    });
    child.once('exit', (code, signal) =>
      signal === 'SIGKILL'
        ? resolve(done)
        : reject(new Error(`the download ended before it was killed (${code})`)),
    );
  });
}

async function main() {
  console.log(
    `download bench: ${size / MiB} MiB, ${rounds} rounds, ${cpuList().length} CPUs, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}, node ${process.version}`,
  );
  const file = join(dir, 'source.bin');
  let t = performance.now();
  const digest = makeFile(file, size);
  console.log(
    `made the file in ${((performance.now() - t) / 1000).toFixed(1)} s (sha256 ${digest.slice(0, 12)}…)`,
  );
  const server = await startFileServer(file);
  const sha = { algorithm: 'sha256', hex: digest };
  const split = defaultConnections(size);
  const results = { curl: [], curlsum: [], bare: [], one: [], split: [] };
  /** Client CPU seconds per GiB: steadier than rates on a shared machine. */
  const cpus = { curl: [], curlsum: [], bare: [], one: [], split: [] };
  try {
    const out = join(dir, 'out');
    const clients = [
      ['curl', () => curlDownload(server.url, out)],
      [
        'curlsum',
        async () => {
          const got = await curlDownload(server.url, out);
          const sum = await sha256sum(out);
          if (sum.hex !== digest) throw new Error('curl fetched other bytes');
          return { seconds: got.seconds + sum.seconds, cpuSeconds: got.cpuSeconds + sum.cpuSeconds };
        },
      ],
      ['bare', () => timeFetch(server.url, out, { connections: 1 })],
      ['one', () => timeFetch(server.url, out, { digest: sha, connections: 1 })],
      ['split', () => timeFetch(server.url, out, { digest: sha })],
    ];
    for (let r = 0; r < rounds; r++) {
      // Each round in another order, each run from a clean page cache: the dirty pages of the
      // run before are written back first, so no run pays for another's writes.
      for (let i = 0; i < clients.length; i++) {
        const [name, run] = clients[(i + r) % clients.length];
        rmSync(out, { force: true });
        execFileSync('sync');
        const took = await run();
        results[name].push(rate(size, took.seconds));
        cpus[name].push(took.cpuSeconds / (size / 1024 / MiB));
      }
      rmSync(out, { force: true });
      console.log(
        `round ${r + 1}: curl ${fmt(results.curl.at(-1))} (${fmt(results.curlsum.at(-1)).trim()} with sha256), fetchFile 1 connection ${fmt(results.bare.at(-1))} (no digest), ${fmt(results.one.at(-1))} (sha256), ${split} connections ${fmt(results.split.at(-1))} (sha256) MiB/s`,
      );
    }
    const curl = median(results.curl);
    console.log('');
    console.log(`medians                        MiB/s   x curl   client CPU s/GiB`);
    for (const [name, key] of [
      ['curl -o', 'curl'],
      ['curl -o, then openssl sha256', 'curlsum'],
      ['fetchFile, 1 conn, no digest', 'bare'],
      ['fetchFile, 1 conn, sha256', 'one'],
      [`fetchFile, ${split} conns, sha256`, 'split'],
    ]) {
      const r = median(results[key]);
      console.log(
        `${name.padEnd(31)}${fmt(r)}    ${(r / curl).toFixed(2)}    ${median(cpus[key]).toFixed(2).padStart(8)}`,
      );
    }

    // Killed in the middle, then resumed: only the rest is asked for.
    for (const connections of [1, split]) {
      const dest = join(dir, `resumed-${connections}`);
      execFileSync('sync');
      const before = server.ranges.length;
      const killedAt = await killedMidway(server.url, dest, digest, size / 2, connections);
      const partsFile = `${dest}.incomplete.parts`;
      const kept = existsSync(partsFile)
        ? JSON.parse(readFileSync(partsFile, 'utf8')).parts.reduce((s, p) => s + p.done, 0)
        : statSync(`${dest}.incomplete`).size;
      const mark = server.ranges.length;
      execFileSync('sync');
      t = performance.now();
      await fetchFile({ url: server.url, dest, size, digest: sha, connections });
      const seconds = (performance.now() - t) / 1000;
      const fetched = server.ranges.slice(mark).reduce((s, r) => s + asked(r), 0);
      console.log(
        `resume (${connections} conn${connections > 1 ? 's' : ''}): killed at ${(killedAt / MiB).toFixed(0)} MiB (${mark - before} request${mark - before === 1 ? '' : 's'}), ${(kept / MiB).toFixed(0)} MiB kept on disk; the resumed run asked for ${(fetched / MiB).toFixed(0)} MiB (${(size - kept - fetched) / MiB === 0 ? 'exactly the rest' : `${((kept + fetched - size) / MiB).toFixed(1)} MiB again`}) in ${seconds.toFixed(2)} s, ${fmt(rate(fetched, seconds)).trim()} MiB/s with the sha256 of the whole file`,
      );
      rmSync(dest, { force: true });
    }
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
