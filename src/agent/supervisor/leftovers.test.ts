import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import {
  commandMatches,
  killLeftovers,
  readBootId,
  runTokenVariable,
  type RecordedProcess,
} from './leftovers.js';
import { isRunning, readStat } from './process-tree.js';

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

describe('killLeftovers', () => {
  it('kills a recorded engine that still runs, with its group, and clears the file', async () => {
    const p = await leftover();
    const bootId = readBootId();
    const file = stateFile([
      record(p, { startTime: readStat(p.pid)?.startTime, ...(bootId === undefined ? {} : { bootId }) }),
    ]);
    const killed = await killLeftovers(file);
    expect(killed).toEqual([{ key: 'r1/0', name: 'llama-server', pids: [p.pid, p.worker] }]);
    expect(isRunning(p.pid)).toBe(false);
    expect(isRunning(p.worker)).toBe(false);
    expect(existsSync(file)).toBe(false);
  });

  it('leaves a process alone whose command line is not the recorded one (a reused pid)', async () => {
    const p = await leftover();
    const file = stateFile([record({ pid: p.pid, command: ['/opt/llama/llama-server', '--port', '8080'] })]);
    expect(await killLeftovers(file)).toEqual([]);
    expect(isRunning(p.pid)).toBe(true);
    expect(isRunning(p.worker)).toBe(true);
    expect(existsSync(file)).toBe(false);
  });

  it('leaves a process alone that started at another time than the recorded one', async () => {
    const p = await leftover();
    const startTime = (readStat(p.pid)?.startTime ?? 0) - 1;
    expect(await killLeftovers(stateFile([record(p, { startTime })]))).toEqual([]);
    expect(isRunning(p.pid)).toBe(true);
  });

  it('finds workers by their run token once their leader is gone', async () => {
    // Random, as the supervisor's are: another test run's processes must not match.
    const token = `r1/0:${randomUUID()}`;
    const p = await leftover({ [runTokenVariable]: token });
    // The leader dies; its worker lives on, as vLLM's engine core can.
    process.kill(p.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 100));
    expect(isRunning(p.worker)).toBe(true);
    const killed = await killLeftovers(stateFile([record(p, { run: token })]));
    expect(killed).toEqual([{ key: 'r1/0', name: 'llama-server', pids: [p.worker] }]);
    expect(isRunning(p.worker)).toBe(false);
  });

  it('does nothing without a file, or with one that is not ours', async () => {
    expect(await killLeftovers(join(tmpdir(), 'llmgw-no-such-file.json'))).toEqual([]);
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-leftovers-'));
    writeFileSync(join(dir, 'p.json'), '{"processes": [{"pid": "1"}]}');
    expect(await killLeftovers(join(dir, 'p.json'))).toEqual([]);
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
