#!/usr/bin/env node
// How good the gateway's routing is: the same workloads sent, in one run, through llmgw's
// real Gateway (built dist/, in this process, real HTTP both sides) to fake engines that
// behave as real ones under load (bench/routing-engine.mjs: slots, an engine queue, one
// prefill at a time whose length is the prompt tokens not in that replica's prefix cache,
// decode per token, metrics in vLLM's, SGLang's and llama.cpp's formats), once per policy:
// random, round robin, least loaded, ours (load + prefix + conversation), and an oracle
// that reads every engine's true queue and cache and picks the least predicted TTFT.
//
//   npm run bench:routing          (npm run build && node bench/routing.bench.mjs)
//   BENCH_ONLY=uniform,skewed,burst   the workloads (default all)
//   BENCH_POLICIES=random,round-robin,least-loaded,ours,oracle
//   BENCH_SEED=1                   the workloads' seed (every policy sees the same requests)
//   BENCH_REPEATS=2                runs of the skewed load (seeds SEED, SEED+1, ...), pooled
//   BENCH_DIST=DIR                 the gateway of another build (its own router, whatever the policy)
//   BENCH_SCALE=2                  stretches every engine time and arrival gap (1: twice as quick, noisier)
//
// Exits 1 when a target is missed, saying which: on the skewed load, ours' p90 TTFT at most
// 1.1 × the oracle's and at least 2 × better than round robin's.
import { createServer, request as httpRequest, Agent } from 'node:http';
import { cpus, loadavg } from 'node:os';

import { pino } from 'pino';

import { engineBlocks, loadMetricsOf, SimEngine, templated } from './routing-engine.mjs';

// Another build's gateway (BENCH_DIST=/path/to/dist) measures an older router: it ignores `routing`.
const dist = new URL(
  process.env.BENCH_DIST ? `file://${process.env.BENCH_DIST}/` : '../dist/',
  import.meta.url,
);
const { Gateway } = await import(new URL('gateway/gateway.js', dist).href);
const { nodeRequest } = await import(new URL('http1/client-io.js', dist).href);

// Engine times and arrival gaps are these × scale: 2 by default, so that a busy machine's
// timer lag (tens of ms at its tail) stays small beside the engines' own times.
const scale = Number(process.env.BENCH_SCALE ?? 2);
const seed = Number(process.env.BENCH_SEED ?? 1);
const only = new Set((process.env.BENCH_ONLY ?? 'uniform,skewed,burst').split(',').map((s) => s.trim()));
const policies = (process.env.BENCH_POLICIES ?? 'random,round-robin,least-loaded,ours,oracle')
  .split(',')
  .map((s) => s.trim());

// --- the fleet: four replicas of one model, of three engines ---

const ENGINE = {
  slots: 8,
  /** 1024 blocks of 64 tokens: 64k tokens of KV cache, the prefix cache's room, two-thirds of the system prompts' worth. */
  cacheBlocks: 1024,
  prefillMsPerToken: 0.03 * scale,
  decodeMsPerToken: 4 * scale,
};
const fleet = ['vllm', 'sglang', 'llamacpp', 'vllm'].map(
  (engine, i) =>
    new SimEngine({
      id: `sim-${i}-${engine}`,
      engine,
      apiKey: `engine-key-${i}`,
      servedName: 'sim',
      ...ENGINE,
    }),
);

// --- workloads: sessions of turns, from a seeded generator ---

function rng(s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS =
  'the of and to in is that for it as with was on be by this are from or have an they which one you were all we her she there been if more when will would who so no'.split(
    ' ',
  );
function text(r, chars) {
  let out = '';
  while (out.length < chars) out += `${WORDS[Math.floor(r() * WORDS.length)]}${r() < 0.1 ? '. ' : ' '}`;
  return out.slice(0, chars);
}
const between = (r, lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
const exp = (r, mean) => -Math.log(1 - r()) * mean;
/** Zipf-like: prompt i is chosen with weight 1/(i+1). */
function zipf(r, n) {
  const total = Array.from({ length: n }, (_, i) => 1 / (i + 1)).reduce((a, b) => a + b, 0);
  let x = r() * total;
  for (let i = 0; i < n; i++) {
    x -= 1 / (i + 1);
    if (x <= 0) return i;
  }
  return n - 1;
}

const workloads = {
  uniform: {
    describe:
      'uniform short chats: 600 one-turn chats of 200–2000 characters, 32–64 tokens out, arriving at 120/s ÷ scale (Poisson): about 3/4 of the slots busy',
    make(r) {
      const sessions = [];
      let t = 0;
      for (let i = 0; i < 600; i++) {
        t += exp(r, 1000 / 120) * scale;
        sessions.push({
          at: t,
          system: undefined,
          turns: [{ user: text(r, between(r, 200, 2000)), maxTokens: between(r, 32, 64), thinkMs: 0 }],
        });
      }
      return sessions;
    },
  },
  skewed: {
    repeats: Number(process.env.BENCH_REPEATS ?? 2),
    describe:
      'skewed: 24 system prompts of 3–5k tokens chosen Zipf-like (1/rank), 100 conversations of 3–6 turns arriving at 10/s ÷ scale (2 runs of different seeds, pooled); turns of 50–300 tokens, 32–96 tokens out, the next turn 50–300 ms × scale after the answer',
    make(r) {
      const systems = Array.from({ length: 24 }, () => text(r, between(r, 12_000, 20_000)));
      const sessions = [];
      let t = 0;
      for (let i = 0; i < 100; i++) {
        t += exp(r, 1000 / 10) * scale;
        const turns = Array.from({ length: between(r, 3, 6) }, () => ({
          user: text(r, between(r, 200, 1200)),
          maxTokens: between(r, 32, 96),
          thinkMs: between(r, 50, 300) * scale,
        }));
        sessions.push({ at: t, system: systems[zipf(r, systems.length)], turns });
      }
      return sessions;
    },
  },
  burst: {
    describe:
      'burst: 3 bursts of 96 one-turn requests 2.5 s × scale apart (3× the fleet’s 32 slots at once), each on one of 8 system prompts of 3–5k tokens (Zipf-like), 32–64 tokens out',
    make(r) {
      const systems = Array.from({ length: 8 }, () => text(r, between(r, 12_000, 20_000)));
      const sessions = [];
      for (let b = 0; b < 3; b++)
        for (let i = 0; i < 96; i++)
          sessions.push({
            at: b * 2500 * scale,
            system: systems[zipf(r, systems.length)],
            turns: [{ user: text(r, between(r, 100, 600)), maxTokens: between(r, 32, 64), thinkMs: 0 }],
          });
      return sessions;
    },
  },
};

// --- one run: a gateway with one policy in front of the fleet, the workload through it ---

const keys = {
  check: () => Promise.resolve({ name: 'bench', role: 'user', allowedModels: null, rpm: null, tpm: null }),
};
const routeTable = () => ({
  replicas: fleet.map((e) => ({
    id: e.id,
    model: 'sim',
    engine: e.engine,
    endpoint: e.url,
    apiKey: e.apiKey,
    servedName: 'sim',
    adapters: [],
    capacity: e.slots,
    loadMetrics: loadMetricsOf[e.engine],
    metricsUrl: `${e.url}/metrics`,
    healthPath: '/health',
  })),
  models: [{ name: 'sim', adapters: [], engines: [...new Set(fleet.map((e) => e.engine))] }],
});

/** The oracle: every candidate's true predicted TTFT for this prompt, the least wins (ties: fewer running). */
function oracle(prompts) {
  const byId = new Map(fleet.map((e) => [e.id, e]));
  return (candidates, request) => {
    const prompt = prompts.get(request.requestId);
    if (prompt === undefined) return undefined;
    let best;
    let bestTtft = Infinity;
    let bestRunning = Infinity;
    for (const c of candidates) {
      const e = byId.get(c.id);
      const ttft = e.predictTtft(prompt);
      const running = e.running.size + e.waiting.length;
      if (ttft < bestTtft - 1e-9 || (Math.abs(ttft - bestTtft) <= 1e-9 && running < bestRunning)) {
        best = c.id;
        bestTtft = ttft;
        bestRunning = running;
      }
    }
    return best;
  };
}

let agent = new Agent({ keepAlive: true, maxSockets: Infinity });

/** One streamed chat through the gateway: its TTFT (first content byte) and the answer's text. */
function chat(url, id, messages, maxTokens) {
  return new Promise((resolve) => {
    const started = performance.now();
    const body = JSON.stringify({ model: 'sim', messages, max_tokens: maxTokens, stream: true });
    const req = httpRequest(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: 'Bearer bench',
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'x-request-id': id,
        },
      },
      (res) => {
        let ttft;
        let raw = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          if (ttft === undefined && res.statusCode === 200 && d.includes('"content"'))
            ttft = performance.now() - started;
          raw += d;
        });
        res.on('end', () => {
          let answer = '';
          let tokens = 0;
          for (const line of raw.split('\n')) {
            if (!line.startsWith('data: {')) continue;
            const c = JSON.parse(line.slice(6)).choices?.[0]?.delta?.content;
            if (typeof c === 'string') {
              answer += c;
              tokens += c.split(' ').length - 1;
            }
          }
          resolve({
            ok: res.statusCode === 200,
            status: res.statusCode,
            ttft,
            answer,
            tokens,
            end: performance.now(),
          });
        });
      },
    );
    req.on('error', (e) => resolve({ ok: false, status: e.message, end: performance.now() }));
    req.end(body);
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function runOne(workload, policy, runSeed) {
  for (const e of fleet) e.reset();
  agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  const prompts = new Map();
  const gateway = new Gateway({
    keys,
    routes: { routeTable: () => Promise.resolve(routeTable()) },
    usage: { write: () => Promise.resolve() },
    logger: pino({ level: 'silent' }),
    routing: policy === 'oracle' ? { pick: oracle(prompts) } : { policy },
  });
  await gateway.start();
  const front = createServer((req, res) => gateway.handle(nodeRequest(req), res));
  front.keepAliveTimeout = 60_000;
  await new Promise((resolve) => front.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${front.address().port}`;
  // Readings of every engine before the first request.
  await sleep(400);

  const sessions = workloads[workload].make(rng(runSeed));
  const results = [];
  let n = 0;
  const t0 = performance.now();
  const runSession = async (s) => {
    const wait = t0 + s.at - performance.now();
    if (wait > 0) await sleep(wait);
    const messages = s.system === undefined ? [] : [{ role: 'system', content: s.system }];
    for (const turn of s.turns) {
      messages.push({ role: 'user', content: turn.user });
      const id = `r${n++}`;
      prompts.set(id, engineBlocks(templated(messages)));
      const r = await chat(url, id, messages, turn.maxTokens);
      prompts.delete(id);
      results.push(r);
      if (!r.ok) break;
      messages.push({ role: 'assistant', content: r.answer });
      if (turn.thinkMs > 0) await sleep(turn.thinkMs);
    }
  };
  await Promise.all(sessions.map(runSession));
  const elapsed = (performance.now() - t0) / 1000;

  await gateway.stop();
  front.closeAllConnections();
  await new Promise((resolve) => front.close(resolve));
  agent.destroy();

  const ok = results.filter((r) => r.ok && r.ttft !== undefined);
  return {
    requests: results.length,
    ok: ok.length,
    ttfts: ok.map((r) => r.ttft),
    elapsed,
    tokens: ok.reduce((a, r) => a + r.tokens, 0),
    prompt: fleet.reduce((a, e) => a + e.promptTokens, 0),
    cached: fleet.reduce((a, e) => a + e.cachedTokens, 0),
    perReplica: fleet.map((e) => e.requests),
  };
}

/** One row of the table: a policy's runs of a workload, their TTFTs pooled. */
function summary(workload, policy, runs) {
  const ttfts = runs.flatMap((r) => r.ttfts).sort((a, b) => a - b);
  const q = (p) => ttfts[Math.min(ttfts.length - 1, Math.floor(p * ttfts.length))] ?? NaN;
  const sum = (f) => runs.reduce((a, r) => a + f(r), 0);
  const prompt = sum((r) => r.prompt);
  return {
    workload,
    policy,
    requests: sum((r) => r.requests),
    failed: sum((r) => r.requests - r.ok),
    p50: q(0.5),
    p90: q(0.9),
    p99: q(0.99),
    reqPerS: sum((r) => r.ok) / sum((r) => r.elapsed),
    tokPerS: sum((r) => r.tokens) / sum((r) => r.elapsed),
    hitRate: prompt === 0 ? 0 : sum((r) => r.cached) / prompt,
    perReplica: fleet.map((_, i) => sum((r) => r.perReplica[i])),
  };
}

// --- the run ---

for (const e of fleet) await e.listen();
console.log(
  `bench:routing — ${cpus().length} CPUs, load ${loadavg()[0].toFixed(1)}; node ${process.version}; seed ${seed}, scale ${scale}`,
);
console.log(
  `fleet: ${fleet.map((e) => e.engine).join(', ')}; each ${ENGINE.slots} slots (gateway capacity ${ENGINE.slots}), prefix cache ${ENGINE.cacheBlocks} blocks × 64 tokens, prefill ${ENGINE.prefillMsPerToken} ms per uncached token (one at a time), decode ${ENGINE.decodeMsPerToken} ms per token`,
);
const rows = [];
for (const workload of Object.keys(workloads)) {
  if (!only.has(workload)) continue;
  console.log(`\n${workloads[workload].describe}`);
  console.log(
    `${'policy'.padEnd(13)} ${'reqs'.padStart(5)} ${'fail'.padStart(4)} ${'p50 ms'.padStart(8)} ${'p90 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'req/s'.padStart(7)} ${'tok/s'.padStart(7)} ${'hit %'.padStart(6)}  per replica`,
  );
  // Every policy once per seed, seeds outermost: a drift in the machine's load falls on all alike.
  const runs = new Map(policies.map((p) => [p, []]));
  const repeats = workloads[workload].repeats ?? 1;
  for (let i = 0; i < repeats; i++)
    for (const policy of policies) runs.get(policy).push(await runOne(workload, policy, seed + i));
  for (const policy of policies) {
    const r = summary(workload, policy, runs.get(policy));
    rows.push(r);
    console.log(
      `${policy.padEnd(13)} ${String(r.requests).padStart(5)} ${String(r.failed).padStart(4)} ${r.p50.toFixed(1).padStart(8)} ${r.p90.toFixed(1).padStart(8)} ${r.p99.toFixed(1).padStart(8)} ${r.reqPerS.toFixed(1).padStart(7)} ${r.tokPerS.toFixed(0).padStart(7)} ${(r.hitRate * 100).toFixed(1).padStart(6)}  ${r.perReplica.join('/')}`,
    );
  }
}
await Promise.all(fleet.map((e) => e.close()));

const find = (workload, policy) => rows.find((r) => r.workload === workload && r.policy === policy);
const missed = [];
const ours = find('skewed', 'ours');
const best = find('skewed', 'oracle');
const rr = find('skewed', 'round-robin');
console.log('');
if (ours && best) {
  const ratio = ours.p90 / best.p90;
  console.log(`skewed: ours / oracle p90 TTFT = ${ratio.toFixed(2)} (target ≤ 1.10)`);
  if (!(ratio <= 1.1)) missed.push(`ours' p90 TTFT is ${ratio.toFixed(2)} × the oracle's (target ≤ 1.1)`);
}
if (ours && rr) {
  const ratio = rr.p90 / ours.p90;
  console.log(`skewed: round robin / ours p90 TTFT = ${ratio.toFixed(2)} (target ≥ 2.00)`);
  if (!(ratio >= 2)) missed.push(`round robin's p90 TTFT is only ${ratio.toFixed(2)} × ours (target ≥ 2)`);
}
for (const r of rows) if (r.failed > 0) missed.push(`${r.workload}/${r.policy}: ${r.failed} requests failed`);
if (missed.length > 0) {
  console.log(`\ntargets missed:\n  ${missed.join('\n  ')}`);
  process.exit(1);
}
console.log('\ntargets met');
