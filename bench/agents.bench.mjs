#!/usr/bin/env node
// Scale of the agent channel: one control plane (`llmgw server`, a process of its own)
// with N simulated agents (bench/sim-agents.mjs) connected over loopback, each from its own
// loopback address as agents on N machines would be, heartbeating every 5 s with the full
// telemetry of 8 cards.
//
// 1. A join storm: all N dial at once with a join token. Agents retry as `llmgw agent`
//    does (backoff with full jitter, src/agent/backoff.ts) on a reset or a refusal; the
//    bench prints the time until the last one was welcomed and every failed dial by kind.
// 2. The steady state: the server's CPU share and resident memory over a window, beside
//    the same server measured idle (no agents) in this run.
// 3. A reconnect storm: the server is stopped and started again on the same port; every
//    agent reconnects with its node credential; time until the last one is back, failures.
//
// A storm that has not ended by the deadline prints who is missing and exits 1.
//
//   npm run bench:agents            (N=1000, 30 s window)
//   BENCH_AGENTS=200 BENCH_WINDOW_S=10 npm run bench:agents
//   BENCH_DEADLINE_S=60 (each storm's deadline), BENCH_RESTART=0 (skip the restart storm)
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { failuresOf, startSimAgents, waitAllJoined } from './sim-agents.mjs';

const agents = Number(process.env.BENCH_AGENTS ?? 1000);
const windowS = Number(process.env.BENCH_WINDOW_S ?? 30);
const deadlineS = Number(process.env.BENCH_DEADLINE_S ?? 60);
const restart = process.env.BENCH_RESTART !== '0';
const heartbeatMs = 5000;
const root = fileURLToPath(new URL('..', import.meta.url));
const adminKey = 'bench-admin-key-0123456789abcdefghij';
const clockTicks = 100; // USER_HZ on Linux

// The agent's own backoff and bounds, from the build (npm run bench:agents builds first).
const { backoffDelay } = await import(pathToFileURL(join(root, 'dist/agent/backoff.js')).href);
const { agentReconnectMaxMs } = await import(
  pathToFileURL(join(root, 'dist/protocol/agent-protocol.js')).href
);
const retryDelay = (attempt) => backoffDelay(attempt, { initialMs: 500, maxMs: agentReconnectMaxMs });

function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}
function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startServer(dir, listen) {
  // BENCH_SERVER_NODE_ARGS: e.g. --cpu-prof, to see where the server's time goes.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const child = spawn(process.execPath, [...nodeArgs, join(root, 'bin', 'llmgw.js'), 'server'], {
    env: {
      ...process.env,
      LLMGW_DATA_DIR: dir,
      LLMGW_LISTEN: listen,
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  child.exited = new Promise((r) => child.on('exit', r));
  return child;
}

/** The port the server listens on (its URL is logged at info, which is off): asked of the OS. */
async function serverUrl(child) {
  for (let i = 0; i < 200; i++) {
    const ss = execFileSync('ss', ['-ltnp'], { encoding: 'utf8' });
    const line = ss.split('\n').find((l) => l.includes(`pid=${child.pid},`));
    const port = line?.match(/127\.0\.0\.1:(\d+)/)?.[1];
    if (port !== undefined) return `http://127.0.0.1:${port}`;
    if (child.exitCode !== null) break;
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

const failureText = (f) =>
  `${f.reset} reset, ${f.refused} refused, ${f.timeout} timed out, ${f.status} answered with an error, ${f.other} other`;

const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-agents-'));
let server = startServer(dir, '127.0.0.1:0');
let sims = [];
async function stopServer() {
  server.kill('SIGTERM');
  const killer = setTimeout(() => server.kill('SIGKILL'), 15_000);
  await server.exited;
  clearTimeout(killer);
}
async function finish(code) {
  for (const a of sims) a.stop();
  await stopServer();
  rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}

/** Waits for the storm that began at `since`; on a missed deadline prints who is missing and exits 1. */
async function storm(label, since) {
  const before = failuresOf(sims);
  const { lastJoinMs, missing } = await waitAllJoined(sims, { since, deadlineMs: deadlineS * 1000 });
  const after = failuresOf(sims);
  const failed = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));
  if (missing.length > 0) {
    console.log(
      `${label}: ${agents - missing.length} of ${agents} in after ${deadlineS} s; failed dials: ${failureText(failed)}`,
    );
    for (const a of missing.slice(0, 20))
      console.log(
        `  missing ${a.name}: ${a.dials} dials, last: ${a.fatal ?? a.lastFailure ?? 'no answer yet'}`,
      );
    if (missing.length > 20) console.log(`  ... and ${missing.length - 20} more`);
    await finish(1);
  }
  console.log(
    `${label}: ${agents} agents in ${(lastJoinMs / 1000).toFixed(1)} s; failed dials: ${failureText(failed)}`,
  );
  return failed;
}

try {
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

  const joinStart = performance.now();
  sims = startSimAgents({
    url,
    secret,
    count: agents,
    heartbeatMs,
    retryDelay,
    loopbackSources: process.env.BENCH_ONE_ADDRESS !== '1',
  });
  await storm('join storm', joinStart);
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

  if (restart) {
    await stopServer();
    const restartAt = performance.now();
    server = startServer(dir, url.replace('http://', ''));
    await serverUrl(server);
    console.log(`restarted in ${((performance.now() - restartAt) / 1000).toFixed(1)} s (pid ${server.pid})`);
    await storm('reconnect storm (from the stop)', restartAt);
  }
  await finish(0);
} catch (e) {
  console.error(e);
  await finish(1);
}
