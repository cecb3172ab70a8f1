#!/usr/bin/env node
// What llmgw's gateway costs: the same load sent, in one run, to (1) a fake engine
// directly, (2) through llmgw's gateway (`llmgw up`, whose agent runs the same fake engine
// as a llama.cpp replica) and (3) through nginx as a plain reverse proxy in front of the
// direct engines. Prints throughput, latency, time to the first byte and the proxy's CPU
// per request, and the ratios of each.
//
//   npm run bench:gateway          (npm run build && node bench/gateway.bench.mjs)
//   BENCH_SECONDS=10               measured seconds per run (default 10)
//   BENCH_WARMUP_SECONDS=2         warm-up before each (default 2)
//   BENCH_ONLY=capacity,delay50,stream100   the workloads to run (default all)
//   BENCH_LATENCY_CONCURRENCY=256  clients of the delay50 and stream100 runs (default 256)
//   BENCH_CPU_PROF=DIR             write a V8 CPU profile of the llmgw process into DIR
//   BENCH_NGINX_KEEPALIVE=64       idle connections nginx keeps to each engine
//   BENCH_GATEWAY_WORKERS=N        worker processes of the `workers` path (default: one per core; 0 skips it)
//   BENCH_PIN=1                    pin the proxies (llmgw, its workers, nginx) to the upper half of the
//                                  cores and the engines and the load to the lower half (taskset)
//
// Paths: `direct` (the engine), `gateway` (llmgw's gateway in the control plane's own event loop,
// gateway.workers: 0, as before workers existed), `workers` (`llmgw gateway` with gateway.workers
// processes, routing to the same replicas through the same control plane) and `nginx`.
//
// The load (bench/gateway-load.mjs), the engines and the proxy share one machine: on a
// machine with few cores they compete for them, and the figures say so.
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { findNginx, nginxWorkers, startNginx } from './gateway-nginx.mjs';
import { summarise } from './gateway-profile.mjs';
import { childrenOf, cpuSeconds, freePort, machineCpu, sleep, start, until } from './gateway-proc.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const llmgwBin = join(root, 'bin', 'llmgw.js');
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const only = new Set(
  (process.env.BENCH_ONLY ?? 'capacity,delay50,stream100').split(',').map((s) => s.trim()),
);
const profileDir = process.env.BENCH_CPU_PROF;
const nginxKeepalive = Number(process.env.BENCH_NGINX_KEEPALIVE ?? 64);
const engineKey = 'bench-engine-key-0123456789';
const modes = ['instant', 'delay50', 'stream100'];

const latencyConcurrency = Number(process.env.BENCH_LATENCY_CONCURRENCY ?? 256);
const gatewayWorkers = Number(process.env.BENCH_GATEWAY_WORKERS ?? availableParallelism());
const pin = process.env.BENCH_PIN === '1' && availableParallelism() >= 2;
const half = Math.floor(availableParallelism() / 2);
/** Cores of the proxies, and of the engines and the load, when pinned (taskset -c lists). */
const proxyCores = `${half}-${availableParallelism() - 1}`;
const otherCores = `0-${half - 1}`;

/** The command pinned to `cores` when BENCH_PIN is set. */
function pinned(cmd, args, cores) {
  return pin ? ['taskset', ['-c', cores, cmd, ...args]] : [cmd, args];
}

/** A process's children, theirs, and so on. */
function descendants(pid) {
  const out = [];
  for (const child of childrenOf(pid)) out.push(child, ...descendants(child));
  return out;
}

/** Moves a running process (every thread) to `cores` when BENCH_PIN is set. */
function repin(pid, cores) {
  if (pin) return run('taskset', ['-a', '-p', '-c', cores, String(pid)], process.env);
  return Promise.resolve();
}

const workloads = [
  { group: 'capacity', mode: 'instant', concurrency: 64 },
  { group: 'capacity', mode: 'instant', concurrency: 256 },
  { group: 'delay50', mode: 'delay50', concurrency: latencyConcurrency },
  { group: 'stream100', mode: 'stream100', concurrency: latencyConcurrency },
]
  .filter((w) => only.has(w.group))
  .map((w) => ({ ...w, id: `${w.mode} c${w.concurrency}` }));

const children = [];
const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-gateway-'));

function run(cmd, args, env) {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function nginxVersion(bin) {
  return run(bin, ['-v'], process.env).then(
    (r) => (r.stderr.trim().split('/')[1] ?? r.stderr.trim()) || 'unknown',
  );
}

// --- the engines ---

/** The engine binary llmgw's agent runs: the fake, without any NODE_OPTIONS the bench was given. */
function writeEngineBin() {
  const bin = join(dir, 'llama-server');
  writeFileSync(
    bin,
    `#!/bin/sh\nunset NODE_OPTIONS\nexec "${process.execPath}" "${join(root, 'bench', 'gateway-fake-engine.mjs')}" "$@"\n`,
  );
  chmodSync(bin, 0o755);
  return bin;
}

async function startDirectEngine(bin, mode) {
  const port = await freePort();
  const [cmd, args] = pinned(
    bin,
    ['--host', '127.0.0.1', '--port', String(port), '--metrics', '--parallel', '512'],
    otherCores,
  );
  const proc = start(cmd, args, {
    env: { PATH: process.env.PATH ?? '', LLAMA_API_KEY: engineKey, BENCH_ENGINE_MODE: mode },
  });
  children.push(proc);
  await until(
    `the ${mode} engine on port ${port}`,
    async () => ((await fetch(`http://127.0.0.1:${port}/health`)).ok ? true : undefined),
    20_000,
  );
  return { port, proc };
}

// --- llmgw ---

function llmgwConfig({ port, engineBin, model, replicas }) {
  const lines = [
    `listen: 127.0.0.1:${port}`,
    `data_dir: ${join(dir, 'llmgw')}`,
    // Today's single event loop: the `workers` path is a gateway of its own beside it.
    'gateway: {workers: 0}',
    'agent:',
    '  stop_grace_s: 2',
    '  engines:',
    `    llamacpp: {bin: ${engineBin}}`,
    'placement:',
    // One thread reserved per CPU replica, so that they fit on a machine of few cores.
    '  cpu_threads: 1',
    'models:',
  ];
  for (const mode of modes) {
    lines.push(
      `  - name: ${mode}`,
      `    source: ${model}`,
      `    replicas: ${replicas[mode]}`,
      '    profiles:',
      '      - name: cpu',
      '        engine: llamacpp',
      '        cpu: true',
      // 512 slots: the gateway counts the replica full only past 512 in flight, so it never queues at 256.
      "        args: ['--parallel', '512']",
      `        env: {BENCH_ENGINE_MODE: ${mode}}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The environment of llmgw and of `llmgw ctl`: none of the caller's LLMGW_* settings, no GPU. */
function llmgwEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('LLMGW_') && k !== 'NODE_OPTIONS') env[k] = v;
  return {
    ...env,
    XDG_CONFIG_HOME: join(dir, 'xdg'),
    LLMGW_LOG_LEVEL: 'warn',
    LLMGW_NVML_LIBRARY: join(dir, 'no-libnvidia-ml.so'),
    LLMGW_NVIDIA_SMI: join(dir, 'no-nvidia-smi'),
    ...extra,
  };
}

async function replicaStates() {
  const r = await run(process.execPath, [llmgwBin, 'ctl', 'replicas', '--json'], llmgwEnv());
  if (r.code !== 0) throw new Error(`llmgw ctl replicas: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout).items;
}

/** Waits until every model that should run has a ready replica, and the gateway serves it. */
async function waitReady(url, adminKey, replicas) {
  const wanted = modes.filter((m) => replicas[m] > 0);
  const items = await until(
    `replicas of ${wanted.join(', ')} ready`,
    async () => {
      const items = await replicaStates();
      return wanted.every((m) => items.some((r) => r.model === m && r.state === 'ready')) ? items : undefined;
    },
    90_000,
  );
  for (const m of wanted) {
    await until(`the gateway serving ${m}`, async () => {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(bodyOf(m)),
      });
      await res.arrayBuffer();
      return res.ok ? true : undefined;
    });
  }
  return items.filter((r) => wanted.includes(r.model));
}

async function putConfig(url, adminKey, text) {
  const res = await fetch(`${url}/api/v1/config`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/yaml' },
    body: text,
  });
  if (!res.ok) throw new Error(`PUT /api/v1/config: ${res.status} ${await res.text()}`);
}

// --- the load ---

function bodyOf(mode) {
  const body = {
    model: mode,
    messages: [{ role: 'user', content: 'Say hello.' }],
    max_tokens: mode === 'stream100' ? 100 : 8,
  };
  // As most clients stream: without stream_options, so the gateway asks the engine for usage and drops that chunk.
  if (mode === 'stream100') body.stream = true;
  return body;
}

/** One run of the load; the proxy's CPU and the machine's are read when its window opens and closes. */
function runLoad({ url, key, mode, concurrency, proxyCpu }) {
  const spec = {
    url,
    headers: { authorization: `Bearer ${key}` },
    body: bodyOf(mode),
    concurrency,
    seconds,
    warmupSeconds,
  };
  const [cmd, args] = pinned(
    process.execPath,
    [join(root, 'bench', 'gateway-load.mjs'), JSON.stringify(spec)],
    otherCores,
  );
  const proc = start(cmd, args);
  children.push(proc);
  let cpu0 = 0;
  let cpu1 = 0;
  let m0;
  let m1;
  let result;
  const lines = createInterface({ input: proc.child.stdout });
  lines.on('line', (line) => {
    if (line === 'measuring') {
      cpu0 = proxyCpu();
      m0 = machineCpu();
    } else if (line === 'stopped') {
      cpu1 = proxyCpu();
      m1 = machineCpu();
    } else if (line.startsWith('{')) {
      result = JSON.parse(line);
    }
  });
  return proc.exited.then(({ code }) => {
    if (code !== 0 || result === undefined || m1 === undefined)
      throw new Error(`the load failed (exit ${code}):\n${proc.output()}`);
    const proxyCpuS = cpu1 - cpu0;
    return {
      ...result,
      proxy_cpu_s: proxyCpuS,
      // CPU-seconds per 1,000 requests = CPU-milliseconds per request.
      cpu_per_1k: result.requests > 0 ? (proxyCpuS / result.requests) * 1000 : null,
      machine_busy: (m1.busy - m0.busy) / (m1.all - m0.all),
    };
  });
}

// --- output ---

const f = (v, digits = 1) => (v === null || v === undefined || Number.isNaN(v) ? '–' : v.toFixed(digits));
const ratio = (a, b) =>
  a === null || b === null || a === undefined || b === undefined || b === 0 ? '–' : `${(a / b).toFixed(2)}x`;
const signed = (v, digits = 2) =>
  v === null || v === undefined ? '–' : `${v >= 0 ? '+' : ''}${v.toFixed(digits)}`;
const diff = (a, b) => (a === null || b === null || a === undefined || b === undefined ? null : a - b);

function printCapacity(results, paths) {
  if (!workloads.some((w) => w.group === 'capacity')) return;
  console.log('\n### Capacity: `instant` engine (answers at once)\n');
  console.log(
    '| concurrency | path | req/s | p50 ms | p99 ms | proxy CPU s per 1,000 req | machine CPU busy | errors |',
  );
  console.log('|---:|---|---:|---:|---:|---:|---:|---:|');
  for (const w of workloads.filter((x) => x.group === 'capacity')) {
    for (const p of paths) {
      const r = results[w.id]?.[p];
      if (r === undefined) continue;
      console.log(
        `| ${w.concurrency} | ${p} | ${f(r.rps, 0)} | ${f(r.p50, 2)} | ${f(r.p99, 2)} | ${p === 'direct' ? '–' : f(r.cpu_per_1k, 3)} | ${f(r.machine_busy * 100, 0)}% | ${r.errors} |`,
      );
    }
  }
  console.log(
    '\n| concurrency | throughput gateway/direct | throughput gateway/nginx | nginx/direct | CPU per request gateway/nginx | throughput workers/direct | throughput workers/gateway | CPU per request workers/nginx |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const w of workloads.filter((x) => x.group === 'capacity')) {
    const r = results[w.id] ?? {};
    console.log(
      `| ${w.concurrency} | ${ratio(r.gateway?.rps, r.direct?.rps)} | ${ratio(r.gateway?.rps, r.nginx?.rps)} | ${ratio(r.nginx?.rps, r.direct?.rps)} | ${ratio(r.gateway?.cpu_per_1k, r.nginx?.cpu_per_1k)} | ${ratio(r.workers?.rps, r.direct?.rps)} | ${ratio(r.workers?.rps, r.gateway?.rps)} | ${ratio(r.workers?.cpu_per_1k, r.nginx?.cpu_per_1k)} |`,
    );
  }
}

function printLatency(results, paths) {
  const ws = workloads.filter((x) => x.group !== 'capacity');
  if (ws.length === 0) return;
  console.log(
    `\n### Added latency: \`delay50\` (answers after 50 ms) and \`stream100\` (100 tokens, 10 ms apart), ${latencyConcurrency} concurrent\n`,
  );
  console.log(
    '| workload | path | req/s | p50 ms | p99 ms | TTFB p50 ms | TTFB p99 ms | added p50 | added p99 | added TTFB p50 | added TTFB p99 | proxy CPU s per 1,000 req | errors |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const w of ws) {
    const d = results[w.id]?.direct;
    for (const p of paths) {
      const r = results[w.id]?.[p];
      if (r === undefined) continue;
      const add = (k) => (p === 'direct' ? '–' : signed(diff(r[k], d?.[k])));
      console.log(
        `| ${w.mode} | ${p} | ${f(r.rps, 0)} | ${f(r.p50, 2)} | ${f(r.p99, 2)} | ${f(r.ttfb_p50, 2)} | ${f(r.ttfb_p99, 2)} | ${add('p50')} | ${add('p99')} | ${add('ttfb_p50')} | ${add('ttfb_p99')} | ${p === 'direct' ? '–' : f(r.cpu_per_1k, 3)} | ${r.errors} |`,
      );
    }
  }
  console.log(
    '\n| workload | p50 gateway/direct | p99 gateway/direct | TTFB p50 gateway/direct | TTFB p99 gateway/direct | p99 gateway/nginx | TTFB p99 gateway/nginx | added TTFB p50 gateway − nginx | CPU per request gateway/nginx |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const w of ws) {
    const r = results[w.id] ?? {};
    console.log(
      `| ${w.mode} | ${ratio(r.gateway?.p50, r.direct?.p50)} | ${ratio(r.gateway?.p99, r.direct?.p99)} | ${ratio(r.gateway?.ttfb_p50, r.direct?.ttfb_p50)} | ${ratio(r.gateway?.ttfb_p99, r.direct?.ttfb_p99)} | ${ratio(r.gateway?.p99, r.nginx?.p99)} | ${ratio(r.gateway?.ttfb_p99, r.nginx?.ttfb_p99)} | ${signed(diff(r.gateway?.ttfb_p50, r.nginx?.ttfb_p50))} | ${ratio(r.gateway?.cpu_per_1k, r.nginx?.cpu_per_1k)} |`,
    );
  }
}

/** The targets: added p50 < 1 ms and p99 < 5 ms (delay50 whole answer, stream100 first token); CPU per request ≤ 2 × nginx's. */
function checkTargets(results) {
  const checks = [];
  const latency = (id, label, key, limit) => {
    const r = results[id];
    if (r?.gateway === undefined || r.direct === undefined) return;
    const added = r.gateway[key] - r.direct[key];
    checks.push({
      what: `${label}: added ${key.replace('_', ' ')} < ${limit} ms`,
      met: added < limit,
      detail: `${signed(added)} ms${added < limit ? '' : `, ${f(added - limit, 2)} ms over`}`,
    });
  };
  const d = `delay50 c${latencyConcurrency}`;
  const st = `stream100 c${latencyConcurrency}`;
  latency(d, d, 'p50', 1);
  latency(d, d, 'p99', 5);
  latency(st, st, 'ttfb_p50', 1);
  latency(st, st, 'ttfb_p99', 5);
  for (const id of ['instant c64', 'instant c256']) {
    const r = results[id];
    // Issue 15: gateway workers at most 1.5 × nginx's CPU per request, and at least 0.9 × direct's throughput.
    if (r?.workers?.cpu_per_1k !== undefined && r.nginx?.cpu_per_1k !== undefined) {
      const x = r.workers.cpu_per_1k / r.nginx.cpu_per_1k;
      checks.push({
        what: `${id}: workers' CPU per request ≤ 1.5 × nginx's`,
        met: x <= 1.5,
        detail: `${x.toFixed(2)}x`,
      });
    }
    if (r?.workers?.rps !== undefined && r.direct?.rps !== undefined) {
      const x = r.workers.rps / r.direct.rps;
      checks.push({
        what: `${id}: workers' throughput ≥ 0.9 × direct${pin ? '' : ' (unpinned: the load, the engine and the proxy share every core)'}`,
        met: x >= 0.9,
        detail: `${x.toFixed(2)}x`,
      });
    }
    if (r?.gateway?.cpu_per_1k === undefined || r.nginx?.cpu_per_1k === undefined) continue;
    const x = r.gateway.cpu_per_1k / r.nginx.cpu_per_1k;
    checks.push({
      what: `${id}: CPU per request ≤ 2 × nginx's`,
      met: x <= 2,
      detail: `${x.toFixed(2)}x${x <= 2 ? '' : `, ${f(x / 2, 2)} times the allowance`}`,
    });
  }
  console.log('\n### Targets\n');
  for (const c of checks) console.log(`- ${c.met ? 'met' : 'MISSED'}: ${c.what} (${c.detail})`);
  return checks;
}

// --- the run ---

async function main() {
  const cpuList = cpus();
  const nginxBin = findNginx();
  const machine = `${cpuList.length} × ${cpuList[0]?.model.trim() ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}, Node ${process.version}${nginxBin === undefined ? '' : `, nginx ${await nginxVersion(nginxBin)}`}`;
  console.log(
    `machine: ${machine}; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `note: the load generator, the engines and the proxy all run on these ${cpuList.length} cores and compete for them;` +
      (cpuList.length <= 4
        ? ' on so few cores the proxy is starved too, and the figures are a floor, not what a dedicated gateway host gives.'
        : ''),
  );
  console.log(
    `${seconds} s measured after ${warmupSeconds} s of warm-up per run; workloads: ${workloads.map((w) => w.id).join(', ')}`,
  );
  console.log(
    pin
      ? `pinned: proxies (llmgw, its ${gatewayWorkers} workers, nginx) on cores ${proxyCores}; engines and load on ${otherCores}`
      : 'not pinned (BENCH_PIN=1 pins the proxies and the rest to separate halves of the cores)',
  );

  const engineBin = writeEngineBin();
  // A safetensors file of no tensors (its 8-byte header length, then `{}` padded to 8): a model
  // llmgw's check of local sources takes; the fake engine only looks that it exists.
  const model = join(dir, 'bench.safetensors');
  const header = Buffer.from('{}      ');
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(model, Buffer.concat([length, header]));

  // (1) The engines hit directly, one per mode, with a key of the bench's.
  const direct = {};
  for (const mode of modes) direct[mode] = await startDirectEngine(engineBin, mode);

  // (2) llmgw. Each CPU replica reserves one thread: on a machine of fewer than three
  // cores the three do not fit at once, so `stream100` takes `instant`'s place for its run.
  const needed = modes.filter((m) => workloads.some((w) => w.mode === m));
  const allFit = needed.length <= cpuList.length;
  const first = Object.fromEntries(
    modes.map((m) => [m, needed.includes(m) && (allFit || m !== 'stream100') ? 1 : 0]),
  );
  if (!allFit) {
    console.log(
      `note: ${cpuList.length} cores hold ${cpuList.length} CPU replicas of one thread; stream100's replica takes instant's place for its run (PUT /api/v1/config)`,
    );
  }
  const port = await freePort();
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, llmgwConfig({ port, engineBin, model, replicas: first }));
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });
  // --cpu-prof is refused in NODE_OPTIONS: given to node itself. The profile is written when llmgw exits.
  const profileArgs = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
  const [upCmd, upArgs] = pinned(
    process.execPath,
    [...profileArgs, llmgwBin, 'up', '-c', configPath],
    proxyCores,
  );
  const llmgw = start(upCmd, upArgs, {
    cwd: dir,
    env: llmgwEnv(),
  });
  children.push(llmgw);
  const adminKey = await until(
    'llmgw to print its admin key',
    () => {
      if (llmgw.child.exitCode !== null)
        throw new Error(`llmgw exited (${llmgw.child.exitCode}):\n${llmgw.output()}`);
      return /shown only this once[^\n]*\n\n\s+(llmgw_key_\w+)/.exec(llmgw.output())?.[1];
    },
    60_000,
  );
  const url = `http://127.0.0.1:${port}`;
  const ready = await waitReady(url, adminKey, first);
  console.log(
    `llmgw pid ${llmgw.pid} at ${url}; replicas ready: ${ready.map((r) => `${r.model} ${r.endpoint}`).join(', ')}`,
  );
  // The agent's engines are llmgw's children: pinned with the load, away from the proxies.
  const pinEngines = async () => {
    for (const pid of descendants(llmgw.pid)) await repin(pid, otherCores);
  };
  await pinEngines();

  // (2b) The same replicas through gateway worker processes: `llmgw gateway` on the same control plane.
  let workers;
  if (gatewayWorkers > 0) {
    const wport = await freePort();
    const wconfig = join(dir, 'workers.yaml');
    writeFileSync(wconfig, `data_dir: ${join(dir, 'workers')}\ngateway: {workers: ${gatewayWorkers}}\n`);
    const [wcmd, wargs] = pinned(
      process.execPath,
      [
        llmgwBin,
        'gateway',
        '--server',
        url,
        '--key',
        adminKey,
        '--listen',
        `127.0.0.1:${wport}`,
        '-c',
        wconfig,
      ],
      proxyCores,
    );
    workers = start(wcmd, wargs, { cwd: dir, env: llmgwEnv() });
    children.push(workers);
    workers.url = `http://127.0.0.1:${wport}`;
    for (const m of modes.filter((x) => first[x] > 0))
      await until(`the gateway workers serving ${m}`, async () => {
        const res = await fetch(`${workers.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(bodyOf(m)),
        });
        await res.arrayBuffer();
        return res.ok ? true : undefined;
      });
    workers.cpu = () => [workers.pid, ...childrenOf(workers.pid)].reduce((t, pid) => t + cpuSeconds(pid), 0);
    console.log(
      `llmgw gateway pid ${workers.pid} with ${childrenOf(workers.pid).length} workers at ${workers.url}`,
    );
  }

  // (3) nginx, in front of the direct engines.
  let nginx;
  if (nginxBin === undefined) {
    console.log('nginx not installed (apt-get install nginx); skipping the nginx comparison');
  } else {
    const nginxPort = await freePort();
    nginx = startNginx({
      bin: nginxBin,
      prefix: join(dir, 'nginx'),
      port: nginxPort,
      upstreams: Object.fromEntries(modes.map((m) => [m, direct[m].port])),
      keepalive: nginxKeepalive,
    });
    children.push(nginx);
    for (const pid of nginx.pids()) await repin(pid, proxyCores);
    nginx.url = `http://127.0.0.1:${nginxPort}`;
    await until(
      'nginx',
      async () => ((await fetch(`${nginx.url}/instant/health`)).ok ? true : undefined),
      20_000,
    );
    console.log(
      `nginx pids ${nginx.pids().join(', ')} (${nginxWorkers} worker, keepalive ${nginxKeepalive} to each engine) at ${nginx.url}`,
    );
  }

  // The llmgw process at rest (control plane, agent, scrapes of its replicas): part of every figure below.
  const idle0 = cpuSeconds(llmgw.pid);
  await sleep(3000);
  const idleShare = (cpuSeconds(llmgw.pid) - idle0) / 3;
  console.log(`llmgw idle: ${f(idleShare * 100, 1)}% of one core`);

  const paths = [
    'direct',
    'gateway',
    ...(workers === undefined ? [] : ['workers']),
    ...(nginx === undefined ? [] : ['nginx']),
  ];
  const results = {};
  let swapped = false;
  for (const w of workloads) {
    if (w.mode === 'stream100' && !allFit && !swapped) {
      const next = { ...first, instant: 0, stream100: 1 };
      await putConfig(url, adminKey, llmgwConfig({ port, engineBin, model, replicas: next }));
      const now = await waitReady(url, adminKey, next);
      await pinEngines();
      console.log(`stream100 replica ready at ${now.find((r) => r.model === 'stream100')?.endpoint}`);
      swapped = true;
    }
    results[w.id] = {};
    for (const p of paths) {
      const target =
        p === 'direct'
          ? {
              url: `http://127.0.0.1:${direct[w.mode].port}/v1/chat/completions`,
              key: engineKey,
              proxyCpu: () => 0,
            }
          : p === 'gateway'
            ? { url: `${url}/v1/chat/completions`, key: adminKey, proxyCpu: () => cpuSeconds(llmgw.pid) }
            : p === 'workers'
              ? { url: `${workers.url}/v1/chat/completions`, key: adminKey, proxyCpu: () => workers.cpu() }
              : {
                  url: `${nginx.url}/${w.mode}/v1/chat/completions`,
                  key: engineKey,
                  proxyCpu: () => nginx.cpuSeconds(),
                };
      const r = await runLoad({ ...target, mode: w.mode, concurrency: w.concurrency });
      results[w.id][p] = r;
      console.log(
        `${w.id.padEnd(15)} ${p.padEnd(8)} ${f(r.rps, 0).padStart(6)} req/s  p50 ${f(r.p50, 2)} p99 ${f(r.p99, 2)} ms  TTFB p50 ${f(r.ttfb_p50, 2)} p99 ${f(r.ttfb_p99, 2)} ms` +
          `${p === 'direct' ? '' : `  proxy CPU ${f(r.cpu_per_1k, 3)} s/1k req`}  machine ${f(r.machine_busy * 100, 0)}% busy  load CPU ${f(r.client_cpu_s, 1)} s  errors ${r.errors}${r.first_error === undefined ? '' : ` (${r.first_error})`}`,
      );
    }
  }

  console.log(`\n## Gateway benchmark: ${machine}`);
  console.log(
    `(${seconds} s per run after ${warmupSeconds} s warm-up; load, engines and proxy share the ${cpuList.length} cores; llmgw idle ${f(idleShare * 100, 1)}% of one core)`,
  );
  printCapacity(results, paths);
  printLatency(results, paths);
  checkTargets(results);
  console.log(
    "\nPublished, for comparison: LiteLLM adds a median of 2–12 ms (its own benchmark, 4 CPUs per instance); GPUStack's old proxy lost two thirds of the throughput.",
  );
  console.log(`\nraw: ${JSON.stringify({ machine, seconds, warmupSeconds, idleShare, results })}`);

  await llmgw.stop('SIGTERM', 30_000);
  if (profileDir !== undefined) {
    const files = readdirSync(profileDir).filter(
      (n) => n.endsWith('.cpuprofile') && n.includes(`.${llmgw.pid}.`),
    );
    for (const file of files) {
      const s = summarise(JSON.parse(readFileSync(join(profileDir, file), 'utf8')));
      console.log(
        `\nCPU profile of llmgw: ${join(profileDir, file)} (${f(s.totalMs / 1000, 1)} s sampled, ${f(s.busyMs / 1000, 1)} s busy); self time, share of the busy time:`,
      );
      for (const [name, ms] of s.functions.slice(0, 25))
        console.log(`${f((ms / s.busyMs) * 100, 1).padStart(5)}%  ${name}`);
      console.log(`(all of it: node bench/gateway-profile.mjs ${join(profileDir, file)})`);
    }
    if (files.length === 0) console.log(`\nno CPU profile of pid ${llmgw.pid} found in ${profileDir}`);
  }
}

async function cleanup() {
  for (const c of children.reverse()) await c.stop('SIGTERM', 10_000).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
}

process.once('SIGINT', () => {
  void cleanup().then(() => process.exit(130));
});

try {
  await main();
} catch (e) {
  console.error(e instanceof Error ? e.stack : e);
  process.exitCode = 1;
} finally {
  await cleanup();
}
