#!/usr/bin/env node
// The load of the gateway benchmark, as a process of its own so that its CPU is not
// counted against the proxy it measures: N clients, each on its own keep-alive
// connection, sending one request after another for a warm-up and then a measured
// window. For every request that ends inside the window it records the time to the
// whole response and to the first byte of the body (for a stream, the first chunk that
// holds a `data:` line).
//
//   node bench/gateway-load.mjs '{"url": "...", "headers": {...}, "body": {...},
//                                 "concurrency": 64, "seconds": 10, "warmupSeconds": 2}'
//
// Prints `measuring` when the window opens and `stopped` when it closes (the bench reads
// the proxy's CPU time then), and last one JSON line:
//   {requests, rps, p50, p99, ttfb_p50, ttfb_p99, errors, ...}; times in milliseconds.
import http from 'node:http';

const spec = JSON.parse(process.argv[2] ?? '{}');
const url = new URL(spec.url);
const concurrency = Number(spec.concurrency ?? 64);
const seconds = Number(spec.seconds ?? 10);
const warmupSeconds = Number(spec.warmupSeconds ?? 2);
const payload = Buffer.from(JSON.stringify(spec.body ?? {}));
const streamed = spec.body?.stream === true;
const headers = {
  'content-type': 'application/json',
  'content-length': payload.length,
  ...(spec.headers ?? {}),
};
const agent = new http.Agent({
  keepAlive: true,
  maxSockets: concurrency,
  maxFreeSockets: concurrency,
  keepAliveMsecs: 10_000,
});
const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');
const EMPTY = Buffer.alloc(0);

const total = [];
const ttfb = [];
let errors = 0;
let firstError;
let windowStart = Infinity;
let windowEnd = Infinity;
let stopping = false;

/** One request; resolves when it is over, whatever the outcome. */
function once() {
  return new Promise((resolve) => {
    const started = performance.now();
    let first;
    let prev = EMPTY;
    let last = EMPTY;
    const finish = (ok, why) => {
      const ended = performance.now();
      if (ended >= windowStart && ended <= windowEnd) {
        if (ok && first !== undefined) {
          total.push(ended - started);
          ttfb.push(first - started);
        } else {
          errors++;
          firstError ??= why;
        }
      }
      resolve(ok);
    };
    const req = http.request(url, { method: 'POST', agent, headers }, (res) => {
      const status = res.statusCode ?? 0;
      res.on('data', (chunk) => {
        if (first === undefined && (!streamed || chunk.includes(DATA))) first = performance.now();
        // The last two chunks, to see that a stream was finished by [DONE].
        prev = last;
        last = chunk;
      });
      res.on('end', () => {
        if (status !== 200) finish(false, `HTTP ${status}`);
        else if (streamed && !Buffer.concat([prev.subarray(-8), last]).includes(DONE))
          finish(false, 'a stream ended without [DONE]');
        else finish(true);
      });
      res.on('error', (e) => finish(false, e.message));
    });
    req.on('error', (e) => finish(false, e.message));
    req.end(payload);
  });
}

async function client() {
  while (!stopping) {
    const ok = await once();
    // A refused connection fails at once: do not spin on it.
    if (!ok) await new Promise((r) => setTimeout(r, 10));
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return Math.round(sorted[rank - 1] * 1000) / 1000;
}

const cpu0 = process.cpuUsage();
const clients = Array.from({ length: concurrency }, () => client());
await new Promise((r) => setTimeout(r, warmupSeconds * 1000));
windowStart = performance.now();
process.stdout.write('measuring\n');
await new Promise((r) => setTimeout(r, seconds * 1000));
windowEnd = performance.now();
process.stdout.write('stopped\n');
stopping = true;
await Promise.all(clients);
agent.destroy();
const cpu = process.cpuUsage(cpu0);

total.sort((a, b) => a - b);
ttfb.sort((a, b) => a - b);
const measured = (windowEnd - windowStart) / 1000;
const result = {
  requests: total.length,
  rps: Math.round((total.length / measured) * 10) / 10,
  p50: percentile(total, 0.5),
  p99: percentile(total, 0.99),
  ttfb_p50: percentile(ttfb, 0.5),
  ttfb_p99: percentile(ttfb, 0.99),
  errors,
  ...(firstError === undefined ? {} : { first_error: firstError }),
  concurrency,
  seconds: Math.round(measured * 1000) / 1000,
  // The load's own CPU, warm-up included: how much of the machine it took.
  client_cpu_s: Math.round(((cpu.user + cpu.system) / 1e6) * 100) / 100,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
