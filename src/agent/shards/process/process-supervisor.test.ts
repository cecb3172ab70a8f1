import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import {
  fakeGguf,
  fakeLlamaServer,
  fakeVllm,
  freePort,
} from '../../../../test/fakes/engines/fake-engines.js';
import type { ProcessSpec } from '../../../engines/types.js';
import { isRunning, readStat } from './process-tree.js';
import { Supervisor, type SupervisorOptions } from './process-supervisor.js';
import type { ShardRun, ShardStatus } from '../types.js';
import { until } from '../../../../test/support/timing.js';

// Real child processes throughout, with short timings. `isRunning` rather than
// `process.kill(pid, 0)`: an orphaned worker that died stays a zombie where PID 1 does
// not reap, and kill(pid, 0) calls a zombie alive.

const supervisors: Supervisor[] = [];
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll()));
});

interface Harness {
  sup: Supervisor;
  events: ShardStatus[];
  removed: string[];
  dir: string;
}

function harness(options: Partial<SupervisorOptions> = {}): Harness {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-supervisor-'));
  const events: ShardStatus[] = [];
  const removed: string[] = [];
  const sup = new Supervisor({
    logDir: join(dir, 'logs'),
    onStatus: (s) => events.push(s),
    onRemoved: (key) => removed.push(key),
    backoff: { initialMs: 50, maxMs: 400 },
    healthIntervalMs: 40,
    readyHealthIntervalMs: 40,
    settleMs: 100,
    gpuCheckDelayMs: 50,
    gpuCheckIntervalMs: 80,
    ...options,
  });
  supervisors.push(sup);
  return { sup, events, removed, dir };
}

/** A Node script as an engine process. */
function node(script: string, name = 'script'): ProcessSpec {
  return { name, bin: process.execPath, args: ['-e', script], env: {} };
}

function shard(key: string, processes: ProcessSpec[], extra: Partial<ShardRun> = {}): ShardRun {
  const [replica = key, rank = '0'] = key.split('/');
  return { key, replica, rank: Number(rank), processes, stopGraceMs: 2000, ...extra };
}

/** One fake llama-server rank on `port`, loading its model for `loadMs`, health-checked as llama.cpp is. */
function llamaShard(key: string, port: number, loadMs: number, args: string[] = []): ShardRun {
  return shard(
    key,
    [
      {
        name: 'llama-server',
        bin: fakeLlamaServer,
        args: ['--model', fakeGguf(), ...args, '--port', String(port)],
        env: { FAKE_LLAMA_LOAD_MS: String(loadMs) },
      },
    ],
    { health: { url: `http://127.0.0.1:${port}/health`, loading: 'answers-503' } },
  );
}

function statusOf(sup: Supervisor, key: string): ShardStatus | undefined {
  return sup.statuses().find((s) => s.key === key);
}

function inState(
  sup: Supervisor,
  key: string,
  state: ShardStatus['state'],
  timeoutMs?: number,
): Promise<ShardStatus> {
  return until(
    `${key} ${state}`,
    () => {
      const s = statusOf(sup, key);
      return s?.state === state ? s : undefined;
    },
    timeoutMs,
  );
}

const idle = 'setInterval(() => {}, 1000);';
/** Forks a worker (same process group), prints its pid, and idles. */
const forking = `
  const { spawn } = require('node:child_process');
  const c = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  console.log('worker ' + c.pid);
  ${idle}`;

function workerPid(sup: Supervisor, key: string): Promise<number> {
  return until(`${key}'s worker`, () => {
    const line = sup.logs(key).find((l) => l.startsWith('worker '));
    return line === undefined ? undefined : Number(line.slice(7));
  });
}

describe('readiness', () => {
  it('waits through the llama-server 503 while loading, then is ready; logs go to the buffer and the file', async () => {
    const { sup, events, dir } = harness();
    const port = await freePort();
    sup.apply([llamaShard('llama-1/0', port, 500, ['--host', '127.0.0.1'])]);
    expect(statusOf(sup, 'llama-1/0')?.state).toBe('starting');
    const ready = await inState(sup, 'llama-1/0', 'ready');
    expect(ready.ready_since).toMatch(/^\d{4}-/);
    expect(ready.pid).toBeGreaterThan(0);
    expect(ready.reason).toBeUndefined();
    expect(
      events.some(
        (e) => e.state === 'starting' && e.reason === 'loading the model (the health check answers 503)',
      ),
    ).toBe(true);
    // The engine writes its file; the lines are read back from it.
    await until('its lines', () =>
      sup.logs('llama-1/0').some((l) => l.includes('llama_server: model loaded')),
    );
    const file = await until('the log file', () => {
      const text = readFileSync(join(dir, 'logs', 'llama-1-r0.log'), 'utf8');
      return text.includes('model loaded') ? text : undefined;
    });
    expect(file).toMatch(/--- llmgw .*: started llama-server \(pid \d+\)/);
  });

  it('takes refused connections as loading for vLLM, and sends the API key', async () => {
    const { sup, events } = harness();
    const port = await freePort();
    sup.apply([
      shard(
        'vllm-1/0',
        [
          {
            name: 'vllm',
            bin: fakeVllm,
            args: ['serve', '/models/q', '--host', '127.0.0.1', '--port', String(port), '--api-key', 'k'],
            env: { FAKE_VLLM_LOAD_MS: '400' },
          },
        ],
        {
          health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections', apiKey: 'k' },
        },
      ),
    ]);
    await inState(sup, 'vllm-1/0', 'ready');
    expect(
      events.some((e) => e.reason === 'loading the model (the engine accepts connections once it is ready)'),
    ).toBe(true);
  });

  it('keeps waiting on an unexpected answer, saying what it was', async () => {
    const { sup } = harness();
    const port = await freePort();
    const server = `require('node:http').createServer((q, s) => { s.writeHead(401); s.end('{"error":"Unauthorized"}'); }).listen(${port}, '127.0.0.1');`;
    sup.apply([
      shard('auth/0', [node(server)], {
        health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections' },
      }),
    ]);
    const s = await until('the 401 reason', () => {
      const st = statusOf(sup, 'auth/0');
      return st?.reason?.includes('answers 401') === true ? st : undefined;
    });
    expect(s.state).toBe('starting');
    expect(s.reason).toContain('{"error":"Unauthorized"}');
    expect(s.reason).toContain('API key');
  });

  it('is ready once alive for settleMs when the rank serves no HTTP', async () => {
    const { sup } = harness({ settleMs: 300 });
    const started = Date.now();
    sup.apply([shard('worker/1', [node(idle)])]);
    expect(statusOf(sup, 'worker/1')?.reason).toMatch(/ready once it has run for 300 ms/);
    await inState(sup, 'worker/1', 'ready');
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
  });

  it('restarts a shard that is not ready in time', async () => {
    const { sup } = harness({ readyTimeoutMs: 300, backoff: { initialMs: 5000, maxMs: 5000 } });
    const port = await freePort();
    sup.apply([llamaShard('slow/0', port, 60000)]);
    const failed = await until('the restart', () => {
      const st = statusOf(sup, 'slow/0');
      return st?.reason?.includes('restarting') === true ? st : undefined;
    });
    expect(failed.state).toBe('failed');
    // Under load the fake may not even listen within 300 ms.
    expect(failed.reason).toMatch(
      /^not ready after 300 ms \(last health check: http:\/\/127\.0\.0\.1:\d+\/health (refuses connections|answers 503 .*Loading model.*)\); raise the ready timeout .*; restarting in 5 s$/,
    );
    expect(failed.restarts).toBe(1);
    expect(failed.last_exit).toBeDefined();
  });

  it('restarts a ready shard after three failed health checks in a row', async () => {
    const { sup } = harness();
    const port = await freePort();
    // 200 for 300 ms, then 500.
    const server = `const t0 = Date.now(); require('node:http').createServer((q, s) => { const ok = Date.now() - t0 < 300; s.writeHead(ok ? 200 : 500); s.end(ok ? 'ok' : 'broken'); }).listen(${port}, '127.0.0.1');`;
    sup.apply([
      shard('flaky/0', [node(server)], {
        health: { url: `http://127.0.0.1:${port}/health`, loading: 'answers-503' },
      }),
    ]);
    await inState(sup, 'flaky/0', 'ready');
    const failed = await until('the restart', () => {
      const st = statusOf(sup, 'flaky/0');
      return st?.reason?.includes('restarting') === true ? st : undefined;
    });
    expect(failed.reason).toMatch(
      /^stopped answering its health check: http:\/\/127\.0\.0\.1:\d+\/health answers 500 broken \(3 times in a row\); restarting in/,
    );
    expect(failed.ready_since).toBeUndefined();
  });
});

describe('crashes', () => {
  it('records the exit and restarts with growing backoff', async () => {
    const { sup, events } = harness({ settleMs: 10_000 });
    sup.apply([
      shard('crash/0', [
        node(
          "console.error('loading'); console.error('fatal error: no CUDA device'); console.error('bye'); process.exit(3);",
          'llama-server',
        ),
      ]),
    ]);
    const s = await until('three restarts', () => {
      const st = statusOf(sup, 'crash/0');
      return st !== undefined && st.restarts >= 3 ? st : undefined;
    });
    expect(s.last_exit).toMatchObject({
      code: 3,
      signal: null,
      log_tail: ['loading', 'fatal error: no CUDA device', 'bye'],
    });
    expect(Date.parse(s.last_exit?.at ?? '')).not.toBeNaN();
    const failures = events.filter((e) => e.state === 'failed');
    expect(failures[0]?.reason).toBe(
      'llama-server exited with code 3; its last error line: fatal error: no CUDA device; restarting in 50 ms',
    );
    expect(failures[1]?.reason).toMatch(/restarting in 100 ms$/);
    expect(failures[2]?.reason).toMatch(/restarting in 200 ms$/);
    // Each failure is followed by a new start.
    const states = events.map((e) => e.state);
    expect(states.indexOf('starting', states.indexOf('failed'))).toBeGreaterThan(0);
  });

  it('starts the backoff over after a run that stayed ready long enough', async () => {
    const { sup, events } = harness({ settleMs: 50, stableMs: 100 });
    sup.apply([shard('stable/0', [node('setTimeout(() => process.exit(1), 400);')])]);
    await until('two restarts', () => (statusOf(sup, 'stable/0')?.restarts ?? 0) >= 2);
    const reasons = events.filter((e) => e.state === 'failed').map((e) => e.reason);
    expect(reasons.slice(0, 2)).toEqual([
      'script exited with code 1; restarting in 50 ms',
      'script exited with code 1; restarting in 50 ms',
    ]);
  });

  it('names the signal that killed it', async () => {
    const { sup } = harness({ settleMs: 10_000, backoff: { initialMs: 5000, maxMs: 5000 } });
    sup.apply([shard('oom/0', [node("process.kill(process.pid, 'SIGKILL');")])]);
    const s = await inState(sup, 'oom/0', 'failed');
    expect(s.reason).toMatch(/^script killed by SIGKILL \(often the out-of-memory killer/);
    expect(s.last_exit).toMatchObject({ code: null, signal: 'SIGKILL' });
  });

  it('kills the workers a crashed engine leaves behind', async () => {
    const { sup } = harness({ settleMs: 10_000, backoff: { initialMs: 5000, maxMs: 5000 } });
    sup.apply([shard('orphan/0', [node(`${forking}; setTimeout(() => process.exit(1), 300);`)])]);
    const worker = await workerPid(sup, 'orphan/0');
    expect(isRunning(worker)).toBe(true);
    await inState(sup, 'orphan/0', 'failed');
    expect(isRunning(worker)).toBe(false);
  });

  it('retries a binary that is not installed (yet)', async () => {
    const { sup } = harness();
    sup.apply([
      shard('missing/0', [{ name: 'llama-server', bin: '/nonexistent/llama-server', args: [], env: {} }]),
    ]);
    const s = await until('two retries', () => {
      const st = statusOf(sup, 'missing/0');
      return st !== undefined && st.restarts >= 2 ? st : undefined;
    });
    expect(s.state === 'failed' || s.state === 'starting').toBe(true);
    const failed = await inState(sup, 'missing/0', 'failed');
    expect(failed.reason).toMatch(/^cannot start \/nonexistent\/llama-server: not found; restarting in/);
    expect(failed.pid).toBeUndefined();
  });
});

describe('stopping', () => {
  it('SIGKILLs a process that ignores SIGTERM once the grace is over', async () => {
    const { sup, dir } = harness();
    sup.apply([
      shard(
        'stubborn/0',
        [node(`process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('armed'); ${idle}`)],
        { stopGraceMs: 400 },
      ),
    ]);
    const { pid } = await inState(sup, 'stubborn/0', 'ready');
    // Node takes a while to start: signal it only once its handler is in place.
    await until('the handler', () => sup.logs('stubborn/0').includes('armed'));
    const t0 = Date.now();
    await sup.stopAll();
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(380);
    expect(took).toBeLessThan(3000);
    expect(isRunning(pid ?? 0)).toBe(false);
    expect(sup.statuses()).toEqual([]);
    // The log file is appended asynchronously: wait for the line rather than race it.
    await until('the kill in the log file', () =>
      /still ran 400 ms after SIGTERM: killed/.test(
        readFileSync(join(dir, 'logs', 'stubborn-r0.log'), 'utf8'),
      ),
    );
  });

  it('stops only the removed shard, with its whole process group', async () => {
    const { sup, events, removed } = harness();
    const a = shard('a/0', [node(forking)]);
    const b = shard('b/0', [node(forking)]);
    sup.apply([a, b]);
    const [readyA, readyB] = await Promise.all([inState(sup, 'a/0', 'ready'), inState(sup, 'b/0', 'ready')]);
    const [workerA, workerB] = await Promise.all([workerPid(sup, 'a/0'), workerPid(sup, 'b/0')]);

    sup.apply([b]);
    expect(statusOf(sup, 'a/0')?.state).toBe('stopping');
    await sup.stopped();
    expect(isRunning(readyA.pid ?? 0)).toBe(false);
    expect(isRunning(workerA)).toBe(false);
    expect(isRunning(readyB.pid ?? 0)).toBe(true);
    expect(isRunning(workerB)).toBe(true);
    expect(sup.statuses().map((s) => s.key)).toEqual(['b/0']);
    expect(removed).toEqual(['a/0']);
    expect(events.filter((e) => e.key === 'a/0').at(-1)?.state).toBe('stopping');
    expect(sup.logs('a/0')).toEqual([]);
  });

  it('cancels a pending restart when the shard is removed', async () => {
    const { sup } = harness({ backoff: { initialMs: 60_000, maxMs: 60_000 } });
    sup.apply([shard('gone/0', [node('process.exit(2)')])]);
    await inState(sup, 'gone/0', 'failed');
    const t0 = Date.now();
    await sup.stopAll();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(sup.statuses()).toEqual([]);
  });

  it('starts a key desired again only once its old processes have exited', async () => {
    const { sup } = harness();
    const run = shard('again/0', [node(`process.on('SIGTERM', () => {}); console.log('armed'); ${idle}`)], {
      stopGraceMs: 300,
    });
    sup.apply([run]);
    const { pid: oldPid } = await inState(sup, 'again/0', 'ready');
    await until('the handler', () => sup.logs('again/0').includes('armed'));
    sup.apply([]);
    sup.apply([run]);
    expect(statusOf(sup, 'again/0')).toMatchObject({
      state: 'starting',
      reason: 'waiting for the previous processes of this shard to exit',
    });
    const newPid = await until('the new process', () => {
      const pid = statusOf(sup, 'again/0')?.pid;
      return pid !== undefined && pid !== oldPid ? pid : undefined;
    });
    expect(isRunning(oldPid ?? 0)).toBe(false);
    expect(isRunning(newPid)).toBe(true);
  });
});

describe('apply', () => {
  it('is idempotent, and restarts exactly the shards whose run changed', async () => {
    const { sup, events } = harness();
    const a = shard('a/0', [node(idle)]);
    const b = shard('b/0', [node(idle)]);
    sup.apply([a, b]);
    const [pidA, pidB] = (
      await Promise.all([inState(sup, 'a/0', 'ready'), inState(sup, 'b/0', 'ready')])
    ).map((s) => s.pid);
    const emitted = events.length;

    sup.apply([{ ...a }, { ...b, processes: [node(idle)] }]);
    sup.apply([a, { ...b, stopGraceMs: 100 }]);
    expect(events.length).toBe(emitted);
    expect(statusOf(sup, 'a/0')?.pid).toBe(pidA);
    expect(statusOf(sup, 'b/0')?.pid).toBe(pidB);

    const changed = { ...b, processes: [{ ...node(idle), env: { LLAMA_ARG_THREADS: '2' } }] };
    sup.apply([a, changed]);
    const restarted = await until('b restarted', () => {
      const s = statusOf(sup, 'b/0');
      return s?.state === 'ready' && s.pid !== pidB ? s : undefined;
    });
    expect(restarted.restarts).toBe(0);
    expect(isRunning(pidB ?? 0)).toBe(false);
    expect(statusOf(sup, 'a/0')?.pid).toBe(pidA);
    expect(() => {
      sup.apply([a, a]);
    }).toThrow(/two shards with the key a\/0/);
  });
});

describe('logs', () => {
  it('keeps the last lines of stdout and stderr, and follows new ones', async () => {
    const { sup } = harness({ logLines: 5 });
    const script = `
      for (let i = 1; i <= 8; i++) process.stdout.write('line ' + i + '\\n');
      process.stdin.resume();
      setTimeout(() => { console.log('late 1'); console.error('late 2'); process.stdout.write('no newline'); }, 400);
      setTimeout(() => process.exit(0), 600);`;
    sup.apply([shard('talk/0', [node(script)], { stopGraceMs: 500 })]);
    await until('8 lines', () => sup.logs('talk/0').includes('line 8'));
    const seen: string[] = [];
    const unfollow = sup.follow('talk/0', (line) => seen.push(line));
    expect(sup.logs('talk/0')).toHaveLength(5);
    expect(sup.logs('talk/0', 2)).toEqual(['line 7', 'line 8']);
    await until('the late lines', () => seen.includes('no newline'));
    expect(seen).toEqual(expect.arrayContaining(['late 1', 'late 2', 'no newline']));
    unfollow();
    const count = seen.length;
    await inState(sup, 'talk/0', 'failed');
    expect(seen.length).toBe(count);
    expect(sup.logs('nobody/0')).toEqual([]);
    expect(typeof sup.follow('nobody/0', () => undefined)).toBe('function');
  });
});

describe('GPU memory check', () => {
  const gpu = { uuids: ['GPU-1111'] };

  it('is degraded while no process of the engine holds memory on its GPU, ready once one does', async () => {
    let holders = new Map<string, number[]>([['GPU-1111', [1]]]);
    let reads = 0;
    const { sup } = harness({
      gpuProcesses: () => {
        reads++;
        return Promise.resolve(holders);
      },
    });
    sup.apply([shard('gpu/0', [node(forking)], { gpu })]);
    const ready = await inState(sup, 'gpu/0', 'ready');
    const degraded = await inState(sup, 'gpu/0', 'degraded');
    expect(degraded.reason).toBe(
      'the engine holds no memory on its GPU (GPU-1111): it is running on the CPU, about ten times slower — use a GPU build of the engine (llama.cpp: the Vulkan or a CUDA archive), or check the driver',
    );
    expect(degraded.ready_since).toBe(ready.ready_since);
    // A worker the engine forked holds the memory, as vLLM's do.
    holders = new Map([['GPU-1111', [await workerPid(sup, 'gpu/0')]]]);
    const back = await inState(sup, 'gpu/0', 'ready');
    expect(back.reason).toBeUndefined();
    expect(reads).toBeGreaterThanOrEqual(2);
  });

  it('stays ready when the engine itself holds the memory', async () => {
    let reads = 0;
    const h = harness({
      gpuProcesses: () => {
        reads++;
        return Promise.resolve(
          new Map([
            ['GPU-0000', [7]],
            ['GPU-1111', [statusOf(h.sup, 'gpu/0')?.pid ?? 0]],
          ]),
        );
      },
    });
    h.sup.apply([shard('gpu/0', [node(idle)], { gpu })]);
    await inState(h.sup, 'gpu/0', 'ready');
    await until('two reads', () => reads >= 2);
    expect(statusOf(h.sup, 'gpu/0')?.state).toBe('ready');
    expect(h.events.some((e) => e.state === 'degraded')).toBe(false);
  });

  it('is degraded from ready on with a known reason, without asking the GPUs', async () => {
    let reads = 0;
    const { sup } = harness({
      gpuProcesses: () => {
        reads++;
        return Promise.resolve(new Map());
      },
    });
    const reason = 'this llama-server build lists no GPU: it runs on the CPU — install a GPU build';
    sup.apply([shard('cpu/0', [node(idle)], { gpu, degradedReason: reason })]);
    expect(statusOf(sup, 'cpu/0')?.state).toBe('starting');
    const s = await inState(sup, 'cpu/0', 'degraded');
    expect(s.reason).toBe(reason);
    expect(s.ready_since).toBeDefined();
    await new Promise((r) => setTimeout(r, 200));
    expect(reads).toBe(0);
  });
});

describe('adoption by the next agent', () => {
  /** A second supervisor on the same data dir, as the agent restarted. */
  function successor(dir: string, options: Partial<SupervisorOptions> = {}): Harness {
    const events: ShardStatus[] = [];
    const removed: string[] = [];
    const sup = new Supervisor({
      logDir: join(dir, 'logs'),
      onStatus: (s) => events.push(s),
      onRemoved: (key) => removed.push(key),
      backoff: { initialMs: 50, maxMs: 400 },
      healthIntervalMs: 40,
      readyHealthIntervalMs: 40,
      settleMs: 100,
      ...options,
    });
    supervisors.push(sup);
    return { sup, events, removed, dir };
  }

  it('takes over an engine left running, keeps its pid and log, and stops it once unassigned', async () => {
    const { sup, dir } = harness();
    const port = await freePort();
    const run = llamaShard('llama-1/0', port, 0);
    sup.apply([run]);
    const { pid } = await inState(sup, 'llama-1/0', 'ready');
    expect(pid).toBeGreaterThan(0);
    // The agent goes (as after kill -9): nothing stops the engine.
    await sup.detach();
    expect(isRunning(pid ?? 0)).toBe(true);
    const recorded = JSON.parse(readFileSync(join(dir, 'processes.json'), 'utf8'));
    expect(recorded.processes).toMatchObject([{ key: 'llama-1/0', pid, pgid: pid }]);

    const next = successor(dir);
    expect(next.sup.adoption.adoptable.map((f) => f.key)).toEqual(['llama-1/0']);
    expect(next.sup.unclaimed()).toEqual(['llama-1/0']);
    next.sup.apply([run]);
    await next.sup.adoptedChecked(5000);
    const adopted = statusOf(next.sup, 'llama-1/0');
    expect(adopted).toMatchObject({ state: 'ready', pid, restarts: 0 });
    // Never reported as starting again once its first check was made: no "starting the engine".
    expect(next.events.some((e) => e.reason === 'starting the engine')).toBe(false);
    // What it wrote before the restart is in its log, and what it writes after too.
    expect(next.sup.logs('llama-1/0').some((l) => l.includes('model loaded'))).toBe(true);
    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'hi', max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    await until('its request logged', () =>
      next.sup.logs('llama-1/0').some((l) => l.includes('processing task')),
    );
    expect(readFileSync(join(dir, 'logs', 'llama-1-r0.log'), 'utf8')).toMatch(
      /--- llmgw .*: adopted llama-server \(pid \d+\), started by an earlier agent/,
    );

    next.sup.apply([]);
    await next.sup.stopped();
    expect(isRunning(pid ?? 0)).toBe(false);
    expect(JSON.parse(readFileSync(join(dir, 'processes.json'), 'utf8')).processes).toEqual([]);
  });

  it('notices the exit of an adopted engine (not its child) and starts it again', async () => {
    const { sup, dir } = harness();
    const port = await freePort();
    const run = llamaShard('crash/0', port, 0);
    sup.apply([run]);
    const { pid } = await inState(sup, 'crash/0', 'ready');
    await sup.detach();
    // Health checks far apart: the exit is what is noticed, not the port that stopped answering.
    const next = successor(dir, { readyHealthIntervalMs: 2000 });
    next.sup.apply([run]);
    expect(statusOf(next.sup, 'crash/0')?.pid).toBe(pid);
    await inState(next.sup, 'crash/0', 'ready');
    process.kill(pid ?? 0, 'SIGKILL');
    const failed = await inState(next.sup, 'crash/0', 'failed');
    expect(failed.reason).toMatch(
      /^llama-server exited \(started by an earlier agent, so its exit status is not known here\)/,
    );
    const again = await inState(next.sup, 'crash/0', 'ready');
    expect(again.pid).not.toBe(pid);
    expect(again.restarts).toBe(1);
  });

  it('replaces an adopted engine whose run changed, once it has exited', async () => {
    const { sup, dir } = harness();
    const port = await freePort();
    const run = llamaShard('changed/0', port, 0);
    sup.apply([run]);
    const { pid } = await inState(sup, 'changed/0', 'ready');
    await sup.detach();
    const next = successor(dir);
    const changed = {
      ...run,
      processes: run.processes.map((p) => ({ ...p, args: [...p.args, '--ctx-size', '4096'] })),
    };
    next.sup.apply([changed]);
    const ready = await inState(next.sup, 'changed/0', 'ready');
    expect(ready.pid).not.toBe(pid);
    expect(isRunning(pid ?? 0)).toBe(false);
  });

  it('stops engines no assignment claims when released, and leaves alone a pid that is not ours', async () => {
    const { sup, dir } = harness();
    const port = await freePort();
    sup.apply([llamaShard('unwanted/0', port, 0)]);
    const { pid } = await inState(sup, 'unwanted/0', 'ready');
    await sup.detach();
    // A record whose pid another process has now: it does not carry the recorded run token.
    const stranger = spawn(process.execPath, ['-e', idle], { detached: true, stdio: 'ignore' });
    const strangerPid = stranger.pid ?? 0;
    const file = join(dir, 'processes.json');
    const state = JSON.parse(readFileSync(file, 'utf8'));
    const [mine] = state.processes;
    state.processes.push({
      ...mine,
      key: 'stranger/0',
      pid: strangerPid,
      pgid: strangerPid,
      command: [process.execPath, '-e', idle],
      startTime: readStat(strangerPid)?.startTime,
    });
    writeFileSync(file, JSON.stringify(state));
    try {
      const next = successor(dir);
      expect(next.sup.adoption.foreign).toEqual([
        {
          key: 'stranger/0',
          pid: strangerPid,
          reason: `pid ${strangerPid} does not carry the recorded run token`,
        },
      ]);
      expect(next.sup.unclaimed()).toEqual(['unwanted/0']);
      // The control plane's first assignment does not place it here.
      expect(next.sup.releaseUnclaimed(() => false)).toEqual(['unwanted/0']);
      await next.sup.stopped();
      expect(isRunning(pid ?? 0)).toBe(false);
      expect(isRunning(strangerPid)).toBe(true);
      expect(JSON.parse(readFileSync(file, 'utf8')).processes).toEqual([]);
    } finally {
      process.kill(strangerPid, 'SIGKILL');
    }
  });
});
