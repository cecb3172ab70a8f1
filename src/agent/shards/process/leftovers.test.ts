import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import {
  checkRecord,
  commandMatches,
  killOrphans,
  readBootId,
  runTokenVariable,
  survey,
  type LiveProcess,
  type RecordedProcess,
} from './leftovers.js';
import { isRunning, readStat, type ProcStat } from './process-tree.js';

/** Processes started here, killed after each test whatever it found. */
const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

/** Forks a worker into its group, prints its pid, then idles. */
const engine = `
  const { spawn } = require('node:child_process');
  const c = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  console.log(c.pid);
  setInterval(() => {}, 1000);`;

/** An engine left behind by an earlier agent: detached, in its own group, with a worker. */
async function leftover(
  env: Record<string, string> = {},
): Promise<{ pid: number; worker: number; command: string[] }> {
  const command = [process.execPath, '-e', engine];
  const child = spawn(command[0] ?? '', command.slice(1), {
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, ...env },
  });
  const pid = child.pid ?? 0;
  started.push(pid);
  const worker = await new Promise<number>((resolve) =>
    child.stdout.once('data', (d: Buffer) => {
      resolve(Number(String(d).trim()));
    }),
  );
  child.stdout.destroy();
  child.unref();
  return { pid, worker, command };
}

function stateFile(processes: RecordedProcess[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'llmgw-leftovers-')), 'processes.json');
  writeFileSync(file, JSON.stringify({ version: 1, processes }));
  return file;
}

function record(
  p: { pid: number; command: string[] },
  extra: Partial<RecordedProcess> = {},
): RecordedProcess {
  return {
    key: 'r1/0',
    name: 'llama-server',
    pid: p.pid,
    pgid: p.pid,
    command: p.command,
    run: `r1/0:${randomUUID()}`,
    ...extra,
  };
}

describe('checkRecord', () => {
  const token = 'r1/0:token';
  const rec: RecordedProcess = {
    key: 'r1/0',
    name: 'llama-server',
    pid: 100,
    pgid: 100,
    command: ['/opt/llama-server', '--port', '1'],
    run: token,
    startTime: 5000,
    bootId: 'boot-a',
    hash: 'h1',
  };
  const stat = (extra: Partial<ProcStat> = {}): ProcStat => ({
    pid: 100,
    state: 'S',
    ppid: 1,
    pgrp: 100,
    startTime: 5000,
    ...extra,
  });
  const live = (extra: Partial<LiveProcess> = {}): LiveProcess => ({
    stat: stat(),
    cmdline: ['/opt/llama-server', '--port', '1'],
    environ: ['PATH=/usr/bin', `${runTokenVariable}=${token}`],
    ...extra,
  });

  it.each<[string, RecordedProcess, LiveProcess, string | undefined, string, RegExp | undefined]>([
    ['running as recorded', rec, live(), 'boot-a', 'adopt', undefined],
    ['another boot', rec, live(), 'boot-b', 'gone', /before the machine restarted/],
    ['exited', rec, live({ stat: undefined }), 'boot-a', 'gone', /has exited/],
    ['a zombie', rec, live({ stat: stat({ state: 'Z' }) }), 'boot-a', 'gone', /has exited/],
    [
      'pid reused (start time)',
      rec,
      live({ stat: stat({ startTime: 7 }) }),
      'boot-a',
      'foreign',
      /another process now/,
    ],
    [
      'no start time recorded',
      { ...rec, startTime: undefined },
      live(),
      'boot-a',
      'foreign',
      /start time was not recorded/,
    ],
    ['environment unreadable', rec, live({ environ: undefined }), 'boot-a', 'foreign', /cannot be read/],
    ['no run token', rec, live({ environ: [`${runTokenVariable}=other`] }), 'boot-a', 'foreign', /run token/],
    [
      'another command',
      rec,
      live({ cmdline: ['/opt/llama-server', '--port', '2'] }),
      'boot-a',
      'stop',
      /command line/,
    ],
    [
      "a wrapper script that exec'd the engine, recorded as it ran once ready",
      {
        ...rec,
        command: ['/opt/wrap.sh', '--port', '1'],
        cmdline: ['/usr/bin/node', '/opt/fake.mjs', '--port', '1'],
      },
      live({ cmdline: ['/usr/bin/node', '/opt/fake.mjs', '--port', '1'] }),
      'boot-a',
      'adopt',
      undefined,
    ],
    [
      "a wrapper script whose exec'd engine now runs other arguments",
      {
        ...rec,
        command: ['/opt/wrap.sh', '--port', '1'],
        cmdline: ['/usr/bin/node', '/opt/fake.mjs', '--port', '1'],
      },
      live({ cmdline: ['/usr/bin/node', '/opt/fake.mjs', '--port', '2'] }),
      'boot-a',
      'stop',
      /command line/,
    ],
    ['left its group', rec, live({ stat: stat({ pgrp: 99 }) }), 'boot-a', 'stop', /process group/],
    ['no run hash (an older agent)', { ...rec, hash: undefined }, live(), 'boot-a', 'stop', /did not record/],
    ['boot id unknown here', rec, live(), undefined, 'adopt', undefined],
  ])('%s: %s', (_what, r, l, bootId, verdict, reason) => {
    const check = checkRecord(r, l, bootId);
    expect(check.verdict).toBe(verdict);
    if (reason !== undefined) expect('reason' in check ? check.reason : '').toMatch(reason);
  });
});

describe('survey', () => {
  it('adopts an engine that runs as recorded, leaves a reused pid alone, kills the orphaned workers of a dead one', async () => {
    const tokenA = `a/0:${randomUUID()}`;
    const a = await leftover({ [runTokenVariable]: tokenA });
    const b = await leftover();
    const tokenC = `c/0:${randomUUID()}`;
    const c = await leftover({ [runTokenVariable]: tokenC });
    // c's leader dies; its worker lives on, as vLLM's engine core can.
    process.kill(c.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 100));
    const bootId = readBootId();
    const boot = bootId === undefined ? {} : { bootId };
    const file = stateFile([
      record(a, { key: 'a/0', run: tokenA, startTime: readStat(a.pid)?.startTime, hash: 'h', ...boot }),
      // b runs, but carries no token of ours: a pid another process has now.
      record(b, { key: 'b/0', startTime: readStat(b.pid)?.startTime, hash: 'h', ...boot }),
      record(c, { key: 'c/0', run: tokenC, startTime: 1, hash: 'h', ...boot }),
    ]);
    const found = survey(file);
    expect(found.adoptable.map((f) => [f.key, f.processes.map((p) => p.pid)])).toEqual([['a/0', [a.pid]]]);
    expect(found.stale).toEqual([]);
    expect(found.foreign).toEqual([
      { key: 'b/0', pid: b.pid, reason: `pid ${b.pid} does not carry the recorded run token` },
    ]);
    expect(found.orphans).toEqual([{ key: 'c/0', pids: [c.worker] }]);
    // A survey only looks: nothing was signalled.
    for (const pid of [a.pid, a.worker, b.pid, c.worker]) expect(isRunning(pid)).toBe(true);
    killOrphans(found.orphans.flatMap((o) => o.pids));
    await new Promise((r) => setTimeout(r, 100));
    expect(isRunning(c.worker)).toBe(false);
  });

  it('finds nothing without a file, or with one that is not ours', () => {
    expect(survey(join(tmpdir(), 'llmgw-no-such-file.json')).adoptable).toEqual([]);
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-leftovers-'));
    writeFileSync(join(dir, 'p.json'), '{"processes": [{"pid": "1"}]}');
    expect(survey(join(dir, 'p.json'))).toEqual({ adoptable: [], stale: [], foreign: [], orphans: [] });
  });
});

describe('commandMatches', () => {
  it.each([
    [['/usr/bin/llama-server', '--port', '1'], ['/usr/bin/llama-server', '--port', '1'], true],
    // Scripts run through their interpreter.
    [
      ['/opt/fakes/llama-server.mjs', '--port', '1'],
      ['node', '/opt/fakes/llama-server.mjs', '--port', '1'],
      true,
    ],
    [['vllm', 'serve', 'm'], ['/usr/bin/python3', '/usr/local/bin/vllm', 'serve', 'm'], true],
    [['vllm', 'serve', 'm'], ['/usr/bin/python3', '/usr/local/bin/vllm', 'serve', 'other'], false],
    [['/usr/bin/llama-server', '--port', '1'], ['/usr/bin/sleep', '--port', '1'], false],
    [['/usr/bin/llama-server', '--port', '1'], ['--port', '1'], false],
    [[], ['x'], false],
  ])('%j against %j: %s', (recorded, live, expected) => {
    expect(commandMatches(recorded, live)).toBe(expected);
  });
});
