import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { fakeGguf, fakeLlamaServer, freePort } from '../../../../test/fakes/engines/fake-engines.js';
import { Supervisor, type SupervisorOptions } from './process-supervisor.js';
import type { ShardRun, ShardStatus } from '../types.js';
import { until } from '../../../../test/support/timing.js';

// A shard's port held by another program: real processes throughout. The "other program"
// is a plain Node HTTP server in a child process that answers 200 on every path, as the
// program that made the agent mark a replica ready did.

const supervisors: Supervisor[] = [];
const others: ChildProcess[] = [];
afterEach(async () => {
  for (const c of others.splice(0)) c.kill('SIGKILL');
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll()));
});

function supervisor(options: Partial<SupervisorOptions> = {}): Supervisor {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-ports-'));
  const sup = new Supervisor({
    logDir: join(dir, 'logs'),
    onStatus: () => undefined,
    backoff: { initialMs: 50, maxMs: 200 },
    healthIntervalMs: 40,
    readyHealthIntervalMs: 40,
    portRetryMs: 50,
    ...options,
  });
  supervisors.push(sup);
  return sup;
}

/** Another program listening on `port` (all interfaces), answering 200 `{"status":"ok"}` to anything. */
async function otherProgram(port: number): Promise<ChildProcess> {
  const script = `require('node:http').createServer((q, s) => { s.writeHead(200, { 'content-type': 'application/json' }); s.end('{"status":"ok"}'); }).listen(${port}, '0.0.0.0', () => console.log('listening'));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  others.push(child);
  await new Promise((resolve) => child.stdout.once('data', resolve));
  return child;
}

/** A fake llama-server shard on `port`; `delayMs` before it starts (a shell waits, then execs it: same pid). */
function llama(key: string, port: number, delayMs = 0): ShardRun {
  const [replica = key, rank = '0'] = key.split('/');
  const args = ['--model', fakeGguf(), '--host', '127.0.0.1', '--port', String(port)];
  const processes =
    delayMs === 0
      ? [{ name: 'llama-server', bin: fakeLlamaServer, args, env: { FAKE_LLAMA_LOAD_MS: '50' } }]
      : [
          {
            name: 'llama-server',
            bin: '/bin/sh',
            args: ['-c', `sleep ${delayMs / 1000}; exec "$0" "$@"`, fakeLlamaServer, ...args],
            env: { FAKE_LLAMA_LOAD_MS: '50' },
          },
        ];
  return {
    key,
    replica,
    rank: Number(rank),
    processes,
    health: { url: `http://127.0.0.1:${port}/health`, loading: 'answers-503' },
    stopGraceMs: 2000,
  };
}

const statusOf = (sup: Supervisor, key: string): ShardStatus | undefined =>
  sup.statuses().find((s) => s.key === key);

describe('a port another program holds', () => {
  it("never counts the other program's answer as the engine's, and says who holds the port", async () => {
    const sup = supervisor();
    const port = await freePort();
    const seen: ShardStatus[] = [];
    const watch = setInterval(() => {
      const s = statusOf(sup, 'r/0');
      if (s !== undefined) seen.push(s);
    }, 5);
    try {
      // The engine starts late; the other program takes the port meanwhile and answers 200.
      sup.apply([llama('r/0', port, 600)]);
      await until('the engine started', () => statusOf(sup, 'r/0')?.pid);
      const other = await otherProgram(port);
      const s = await until('the bind failure', () => {
        const st = statusOf(sup, 'r/0');
        return st?.state === 'failed' && st.restarts >= 1 ? st : undefined;
      });
      expect(s.reason).toBe(
        `llama-server exited with code 1: port ${port} is taken by another program (pid ${other.pid}, node); restarting in 50 ms`,
      );
      expect(s.port_taken).toEqual({ port, pid: other.pid, name: 'node' });
      expect(s.last_exit?.log_tail.join('\n')).toContain(
        `couldn't bind HTTP server socket, hostname: 127.0.0.1, port: ${port}`,
      );
      // While it was starting, the other program's 200 was named, and never made it ready.
      expect(
        seen.some(
          (x) =>
            x.reason ===
            `port ${port} answers, but from another program (pid ${other.pid}, node), not from llama-server: its answers do not count`,
        ),
      ).toBe(true);
      expect(seen.some((x) => x.state === 'ready')).toBe(false);
    } finally {
      clearInterval(watch);
    }
  });

  it('waits without starting the engine again and again, and starts it once the port is free', async () => {
    const sup = supervisor();
    const port = await freePort();
    const other = await otherProgram(port);
    sup.apply([llama('r/0', port)]);
    const waiting = await until('the wait', () => {
      const st = statusOf(sup, 'r/0');
      return st?.port_taken !== undefined ? st : undefined;
    });
    expect(waiting).toMatchObject({
      state: 'failed',
      restarts: 0,
      reason: `port ${port} is taken by another program (pid ${other.pid}, node): waiting for it to be free, or for the control plane to move this replica to a free port`,
      port_taken: { port, pid: other.pid, name: 'node' },
    });
    expect(waiting.pid).toBeUndefined();
    expect(sup.portsTaken(port, port)).toEqual([port]);
    await new Promise((r) => setTimeout(r, 300));
    // No engine was started in the meantime: nothing to crash and restart.
    expect(statusOf(sup, 'r/0')).toMatchObject({ state: 'failed', restarts: 0 });
    expect(sup.logs('r/0').some((l) => l.includes("couldn't bind"))).toBe(false);

    other.kill('SIGKILL');
    const ready = await until('ready once the port is free', () => {
      const st = statusOf(sup, 'r/0');
      return st?.state === 'ready' ? st : undefined;
    });
    expect(ready.port_taken).toBeUndefined();
    expect(ready.restarts).toBe(0);
    // Its own engine's port is not another program's.
    expect(sup.portsTaken(port, port)).toEqual([]);
  });

  it('waits for a port an engine of its own that is stopping still holds, rather than failing to bind', async () => {
    const sup = supervisor();
    const port = await freePort();
    // An engine that takes 400 ms to let go of its port once told to stop.
    const slow = `const s = require('node:http').createServer((q, r) => r.end('ok')).listen(${port}, '127.0.0.1');
      process.on('SIGTERM', () => setTimeout(() => process.exit(0), 400));`;
    sup.apply([
      {
        key: 'old/0',
        replica: 'old',
        rank: 0,
        processes: [{ name: 'slow', bin: process.execPath, args: ['-e', slow], env: {} }],
        health: { url: `http://127.0.0.1:${port}/`, loading: 'refuses-connections' },
        stopGraceMs: 5000,
      },
    ]);
    await until('the old one ready', () => statusOf(sup, 'old/0')?.state === 'ready');
    sup.apply([llama('new/0', port)]);
    await until(
      'the wait for the port',
      () =>
        statusOf(sup, 'new/0')?.reason ===
        `waiting for port ${port}: an engine of this node that is stopping still holds it`,
    );
    const ready = await until('the new one ready', () => {
      const st = statusOf(sup, 'new/0');
      return st?.state === 'ready' ? st : undefined;
    });
    expect(ready.restarts).toBe(0);
    expect(sup.logs('new/0').some((l) => l.includes("couldn't bind"))).toBe(false);
  });
});
