#!/usr/bin/env node
// Scale of the agent channel: one control plane (`llmgw server`, a process of its own)
// with N simulated agents connected over loopback, each heartbeating every 5 s with the
// full telemetry of 8 cards. Prints the server's CPU share and resident memory in the
// steady state, beside the same server measured idle (no agents) in this run.
//
//   npm run bench:agents            (N=1000, 30 s window)
//   BENCH_AGENTS=200 BENCH_WINDOW_S=10 npm run bench:agents
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import WebSocket from 'ws';

const agents = Number(process.env.BENCH_AGENTS ?? 1000);
const windowS = Number(process.env.BENCH_WINDOW_S ?? 30);
const heartbeatMs = 5000;
const root = fileURLToPath(new URL('..', import.meta.url));
const adminKey = 'bench-admin-key-0123456789abcdefghij';
const clockTicks = 100; // USER_HZ on Linux

function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}
function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function card(i) {
  return {
    index: i,
    uuid: `GPU-${randomUUID()}`,
    name: 'NVIDIA H100 80GB HBM3',
    class: 'h100-80g',
    pci_bus_id: `00000000:${(0x10 + i).toString(16).toUpperCase()}:00.0`,
    memory_total_mib: 81559,
    memory_used_mib: 0,
    temperature_c: 40,
    power_w: 100,
    power_limit_w: 700,
    utilization_pct: 0,
    wear: { ecc_uncorrectable: 0, remapped_rows_pending: false, remapped_rows_failure: false },
    mig: { current: false, pending: false },
    processes: [],
    instances: [],
  };
}

function inventory(name) {
  return {
    host: {
      hostname: name,
      os: 'linux bench',
      arch: 'x64',
      cpus: { count: 64, model: 'Bench CPU' },
      memory: { total_mib: 1_000_000, free_mib: 900_000 },
      disk: { path: '/var/lib/llmgw', total_mib: 4_000_000, free_mib: 3_000_000 },
    },
    gpu: {
      method: 'nvml',
      reasons: [],
      driver_version: '590.48.01',
      cuda_version: '13.1',
      cards: Array.from({ length: 8 }, (_, i) => card(i)),
    },
    agent_version: 'bench',
  };
}

function telemetry() {
  return {
    cards: Array.from({ length: 8 }, (_, i) => ({
      index: i,
      memory_used_mib: Math.round(Math.random() * 80000),
      temperature_c: 30 + Math.round(Math.random() * 40),
      power_w: Math.round(Math.random() * 700),
      utilization_pct: Math.round(Math.random() * 100),
      processes: [{ pid: 1000 + i, name: 'python3', memory_mib: 70000 }],
      instances: [],
    })),
    memory_free_mib: 800_000,
    disk_free_mib: 3_000_000,
  };
}

async function startServer(dir) {
  const child = spawn(process.execPath, [join(root, 'bin', 'llmgw.js'), 'server'], {
    env: {
      ...process.env,
      LLMGW_DATA_DIR: dir,
      LLMGW_LISTEN: '127.0.0.1:0',
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  for (let i = 0; i < 200 && !/"url":"http/.test(out); i++) await sleep(50);
  // Logged at info, which is off: ask the OS instead.
  return child;
}

async function serverUrl(child) {
  for (let i = 0; i < 100; i++) {
    const { execFileSync } = await import('node:child_process');
    const ss = execFileSync('ss', ['-ltnp'], { encoding: 'utf8' });
    const line = ss.split('\n').find((l) => l.includes(`pid=${child.pid},`));
    const port = line?.match(/127\.0\.0\.1:(\d+)/)?.[1];
    if (port !== undefined) return `http://127.0.0.1:${port}`;
    await sleep(100);
  }
  throw new Error('the server did not listen');
}

async function measure(pid, seconds) {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpu = cpuSeconds(pid) - c0;
  const wall = (performance.now() - t0) / 1000;
  return { cpuShare: cpu / wall, rss: rssMiB(pid) };
}

const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-agents-'));
const server = await startServer(dir);
const url = await serverUrl(server);
console.log(
  `server pid ${server.pid} at ${url}; ${agents} agents, heartbeat ${heartbeatMs} ms, ${windowS} s windows`,
);

const idle = await measure(server.pid, Math.min(windowS, 10));
console.log(
  `idle:       CPU ${(idle.cpuShare * 100).toFixed(2)}% of one core, RSS ${idle.rss.toFixed(0)} MiB`,
);

const tokenRes = await fetch(`${url}/api/v1/node-tokens`, {
  method: 'POST',
  headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
  body: '{"name":"bench"}',
});
const { secret } = await tokenRes.json();

const sockets = [];
let welcomed = 0;
const joinStart = performance.now();
for (let i = 0; i < agents; i++) {
  const name = `sim-${String(i).padStart(4, '0')}`;
  const ws = new WebSocket(`${url.replace('http', 'ws')}/api/v1/agent/connect`, {
    headers: {
      authorization: `Bearer ${secret}`,
      'x-llmgw-node-id': randomUUID(),
      'x-llmgw-node-name': name,
      'x-llmgw-agent-version': 'bench',
    },
  });
  ws.on('open', () => ws.send(JSON.stringify({ type: 'inventory', inventory: inventory(name) })));
  ws.on('message', () => {
    welcomed++;
    // Heartbeats spread over the interval, as real agents drift apart.
    setTimeout(() => {
      const beat = () =>
        ws.readyState === WebSocket.OPEN &&
        ws.send(JSON.stringify({ type: 'heartbeat', telemetry: telemetry() }));
      beat();
      ws.timer = setInterval(beat, heartbeatMs);
    }, Math.random() * heartbeatMs);
  });
  ws.on('error', (e) => console.error(`${name}: ${e.message}`));
  sockets.push(ws);
  if (i % 50 === 49) await sleep(20);
}
while (welcomed < agents) await sleep(100);
console.log(`joined:     ${agents} agents in ${((performance.now() - joinStart) / 1000).toFixed(1)} s`);
await sleep(heartbeatMs + 1000);

const busy = await measure(server.pid, windowS);
console.log(
  `${agents} agents: CPU ${(busy.cpuShare * 100).toFixed(2)}% of one core, RSS ${busy.rss.toFixed(0)} MiB`,
);
console.log(
  `ratio to idle: CPU ${(busy.cpuShare / Math.max(idle.cpuShare, 0.0001)).toFixed(1)}x, RSS ${(busy.rss / idle.rss).toFixed(2)}x`,
);
console.log(
  `targets: CPU < 15% of one core: ${busy.cpuShare < 0.15 ? 'met' : 'NOT met'}; RSS < 300 MB: ${busy.rss * 1.048576 < 300 ? 'met' : 'NOT met'}`,
);

for (const ws of sockets) {
  clearInterval(ws.timer);
  ws.terminate();
}
server.kill('SIGTERM');
await new Promise((r) => server.on('exit', r));
rmSync(dir, { recursive: true, force: true });
