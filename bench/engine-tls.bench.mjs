#!/usr/bin/env node
// What the engine proxy costs a gateway: the same requests sent with the gateway's own
// upstream pool (1) straight to an engine over plain HTTP, and (2) over TLS through a node's
// engine proxy to that engine on loopback. Prints requests per second and latency of each,
// and their ratio. Engine: bench/gateway-fake-engine.mjs (instant mode), in its own process.
//
//   npm run build:server && node bench/engine-tls.bench.mjs
//   BENCH_SECONDS=5  BENCH_CONCURRENCY=1,32
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { UpstreamPool } = await import(join(root, 'dist/http1/upstream-pool.js'));
const { createCa, issueCertificate } = await import(join(root, 'dist/tls/certificates.js'));

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const levels = (process.env.BENCH_CONCURRENCY ?? '1,32').split(',').map(Number);
const key = 'bench-engine-key';
const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-engine-tls-'));

/** A CA and a certificate it issued for 127.0.0.1: the material a node's agent is given. */
function material() {
  const ca = createCa({ commonName: 'bench CA', days: 1 });
  const node = issueCertificate(ca, { commonName: 'node', ips: ['127.0.0.1'], days: 1, usage: 'server' });
  return { cert: node.cert, key: node.key, ca: ca.cert };
}

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const port = await freePort();
const engine = spawn(
  process.execPath,
  [join(root, 'bench/gateway-fake-engine.mjs'), '--port', String(port), '--parallel', '512'],
  {
    env: { ...process.env, LLAMA_API_KEY: key, BENCH_ENGINE_MODE: 'instant' },
    stdio: 'ignore',
  },
);
await new Promise((r) => setTimeout(r, 500));
const tls = material();
// The proxy in a process of its own, as the agent is: the load's CPU is not the proxy's.
writeFileSync(join(dir, 'tls.json'), JSON.stringify(tls));
const proxyScript = `
  import { readFileSync } from 'node:fs';
  import { pino } from 'pino';
  const { EngineProxy } = await import(${JSON.stringify(join(root, 'dist/agent/engine-proxy.js'))});
  const p = await EngineProxy.start({ host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }) });
  p.setMaterial(JSON.parse(readFileSync(${JSON.stringify(join(dir, 'tls.json'))}, 'utf8')));
  p.setRoutes(new Map([['bench-1', { port: ${port}, apiKey: ${JSON.stringify(key)} }]]));
  process.stdout.write(String(p.port) + '\\n');
`;
const proxyChild = spawn(process.execPath, ['--input-type=module', '-e', proxyScript], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const proxy = {
  port: await new Promise((resolve) =>
    proxyChild.stdout.once('data', (d) => resolve(Number(String(d).trim()))),
  ),
};

const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
const once = (pool) =>
  new Promise((resolve, reject) => {
    let status = 0;
    pool.request(
      {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
      },
      {
        onHead: (s) => (status = s),
        onData: () => {},
        onEnd: () => (status === 200 ? resolve() : reject(new Error(`status ${status}`))),
        onError: reject,
      },
    );
  });

async function measure(pool, concurrency) {
  const latencies = [];
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        await once(pool);
        latencies.push(performance.now() - t);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))].toFixed(2);
  return { rps: latencies.length / seconds, p50: q(0.5), p99: q(0.99) };
}

const targets = [
  ['direct http', `http://127.0.0.1:${port}`, {}],
  ['TLS via engine proxy', `https://127.0.0.1:${proxy.port}/r/bench-1`, { ca: tls.ca }],
];
console.log(`engine proxy bench: ${seconds} s per run, node ${process.version}`);
for (const c of levels) {
  const results = [];
  for (const [name, endpoint, options] of targets) {
    const pool = new UpstreamPool(endpoint, options);
    for (let i = 0; i < 200; i++) await once(pool);
    const r = await measure(pool, c);
    results.push(r);
    console.log(
      `c${c}  ${name.padEnd(22)} ${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  connections ${JSON.stringify(pool.connections)}`,
    );
    await pool.close();
  }
  console.log(`c${c}  TLS/direct throughput ${(results[1].rps / results[0].rps).toFixed(2)}`);
}
proxyChild.kill();
engine.kill();
rmSync(dir, { recursive: true, force: true });
