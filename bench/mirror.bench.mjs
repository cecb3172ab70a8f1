#!/usr/bin/env node
// The control plane's mirror serving a cluster: one large file on an upstream HTTP server (the
// hub's stand-in, its own process), the mirror (its own process, llmgw's Mirror and route), and
// 8 agents (8 processes, llmgw's fetchFile) fetching the file through the mirror at once, while
// the mirror is still fetching it. Baselines in the same run: `curl -o` alone from the upstream,
// and 8 curls at once from the upstream (no mirror). Prints how often the upstream was read,
// each agent's rate, and ratios.
//
//   npm run bench:mirror          (npm run build && node bench/mirror.bench.mjs)
//   BENCH_MIRROR_MB=512           the file's size in MiB (default 512: 8 agents write 8 copies)
//   BENCH_AGENTS=8                agents at once (default 8)
//   BENCH_DIR=/path               where the file and the copies go (default the OS temp dir)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { curlDownload, makeFile, startFileServer } from './download-server.mjs';

const MiB = 1024 * 1024;
const size = Math.round(Number(process.env.BENCH_MIRROR_MB ?? 512) * MiB);
const agents = Number(process.env.BENCH_AGENTS ?? 8);
const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'llmgw-bench-mirror-'));
const dist = (p) => JSON.stringify(fileURLToPath(new URL(`../dist/${p}`, import.meta.url)));
const rate = (bytes, seconds) => bytes / MiB / seconds;
const fmt = (n) => n.toFixed(0).padStart(6);

/** A node program: its first stdout line is JSON (the port, or the result). */
function program(script) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const first = new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl !== -1) resolve(JSON.parse(out.slice(0, nl)));
    });
    child.once('exit', (code) => reject(new Error(`a bench process exited (${code}) before answering`)));
  });
  return { child, first };
}

/** The mirror in its own process: Mirror + its route on node:http, every caller allowed. */
function startMirror(upstream, sha256) {
  const script = `
    import { createServer } from 'node:http';
    import { pino } from 'pino';
    import { Mirror } from ${dist('server/mirror/mirror.js')};
    import { mirrorRoute } from ${dist('server/mirror/mirror-route.js')};
    const origin = { source: ${JSON.stringify(upstream)}, kind: 'url', revision: '"bench"',
      files: [{ path: 'model.bin', size: ${size}, sha256: ${JSON.stringify(sha256)} }] };
    const logger = pino({ level: 'warn' });
    const mirror = new Mirror({ dir: ${JSON.stringify(join(dir, 'mirror'))}, hub: () => ({ endpoint: 'http://127.0.0.1:9' }),
      lookup: (key) => (key === origin.files[0].sha256 ? { origin, file: origin.files[0] } : undefined), logger });
    const route = mirrorRoute({ mirror, authorize: async () => 'bench', logger });
    const server = createServer(route);
    server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\\n'));
  `;
  return program(script);
}

/** One agent: fetchFile from the mirror into its own file, verified; prints its time. */
function agent(url, dest, sha256) {
  const script = `
    import { fetchFile } from ${dist('models/download.js')};
    const started = performance.now();
    await fetchFile({ url: ${JSON.stringify(url)}, dest: ${JSON.stringify(dest)}, size: ${size},
      digest: { algorithm: 'sha256', hex: ${JSON.stringify(sha256)} } });
    process.stdout.write(JSON.stringify({ seconds: (performance.now() - started) / 1000 }) + '\\n');
  `;
  return program(script).first;
}

try {
  console.log(
    `mirror bench: ${size / MiB} MiB, ${agents} agents, ${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)}`,
  );
  const file = join(dir, 'model.bin');
  const sha256 = makeFile(file, size);
  const upstream = await startFileServer(file);
  try {
    const alone = await curlDownload(upstream.url, join(dir, 'curl-alone'));
    rmSync(join(dir, 'curl-alone'));
    const curlAlone = rate(size, alone.seconds);
    const many = await Promise.all(
      Array.from({ length: agents }, (_, i) => curlDownload(upstream.url, join(dir, `curl-${i}`))),
    );
    for (let i = 0; i < agents; i++) rmSync(join(dir, `curl-${i}`));
    const curlMany = many.map((r) => rate(size, r.seconds));
    // The same agents straight from the upstream: what 8 fetchFile processes cost on this machine.
    const direct = await Promise.all(
      Array.from({ length: agents }, (_, i) => agent(upstream.url, join(dir, `direct-${i}`, 'blob'), sha256)),
    );
    for (let i = 0; i < agents; i++) rmSync(join(dir, `direct-${i}`), { recursive: true });
    const directRates = direct.map((r) => rate(size, r.seconds));
    const before = upstream.ranges.length;

    const m = startMirror(upstream.url, sha256);
    const { port } = await m.first;
    const url = `http://127.0.0.1:${port}/api/v1/mirror/blobs/${sha256}`;
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: agents }, (_, i) => agent(url, join(dir, `agent-${i}`, 'blob'), sha256)),
    );
    const wall = (performance.now() - started) / 1000;
    // One more agent once the mirror holds the file: served from its disk alone.
    rmSync(join(dir, 'agent-0'), { recursive: true });
    const held = await agent(url, join(dir, 'agent-0', 'blob'), sha256);
    m.child.kill();
    for (let i = 1; i < agents; i++) {
      if (statSync(join(dir, `agent-${i}`, 'blob')).size !== size)
        throw new Error(`agent ${i} wrote the wrong size`);
    }
    const upstreamReads = upstream.ranges.slice(before);
    const agentRates = results.map((r) => rate(size, r.seconds));
    const slowest = Math.min(...agentRates);
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

    console.log('');
    console.log('                                   MiB/s');
    console.log(`curl alone from the upstream      ${fmt(curlAlone)}`);
    console.log(
      `${agents} curls at once, each (mean)     ${fmt(mean(curlMany))}   slowest ${fmt(Math.min(...curlMany))}`,
    );
    console.log(
      `${agents} agents at once, direct (mean)  ${fmt(mean(directRates))}   slowest ${fmt(Math.min(...directRates))}`,
    );
    console.log(
      `${agents} agents via the mirror (mean)   ${fmt(mean(agentRates))}   slowest ${fmt(slowest)}`,
    );
    console.log(`1 agent, the mirror holding it     ${fmt(rate(size, held.seconds))}`);
    console.log(`all ${agents} copies via the mirror: ${wall.toFixed(1)} s wall`);
    console.log('');
    console.log(
      `upstream requests while the agents fetched: ${upstreamReads.length} (${JSON.stringify(upstreamReads)}); target 1`,
    );
    console.log(`slowest agent / curl alone:          ${(slowest / curlAlone).toFixed(2)}x (target >= 0.5x)`);
    console.log(
      `slowest agent / ${agents} curls at once:    ${(slowest / Math.min(...curlMany)).toFixed(2)}x`,
    );
    console.log(
      `via the mirror / direct (${agents} agents):  ${(mean(agentRates) / mean(directRates)).toFixed(2)}x`,
    );
    console.log(
      `1 agent from the mirror's disk / curl alone: ${(rate(size, held.seconds) / curlAlone).toFixed(2)}x`,
    );
  } finally {
    await upstream.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
