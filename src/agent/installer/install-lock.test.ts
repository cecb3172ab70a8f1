import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { acquireLock, type HeldLock } from './install-lock.js';

let dir: string;
let path: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-lock-'));
  path = join(dir, '.b1-cpu.lock');
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The pid of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid;
}

/** Asks for the lock while `first` holds it: still waiting after 100 ms, then let in once `first` releases. */
async function waitsFor(first: HeldLock): Promise<void> {
  let second = false;
  const waiting = acquireLock(path, { pollMs: 10 }).then((l) => {
    second = true;
    return l;
  });
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(second).toBe(false);
  await first.release();
  const held = await waiting;
  expect(second).toBe(true);
  await held.release();
}

describe('acquireLock', () => {
  it('lets one holder in at a time', async () => {
    await waitsFor(await acquireLock(path, { pollMs: 10 }));
    expect(existsSync(path)).toBe(false);
  });

  it('puts the lock in place with its holder in it, and a draft left by a process killed while taking it blocks nothing', async () => {
    // What a process killed between writing its draft and linking it leaves behind.
    await writeFile(
      `${path}.0123456789abcdef.new`,
      JSON.stringify({ pid: deadPid(), host: hostname(), token: 'x' }),
    );
    const held = await acquireLock(path, { pollMs: 10 });
    // Never an empty lock file: the one in place names its holder whole.
    expect(JSON.parse(await readFile(path, 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    expect(readdirSync(dir).filter((f) => f.endsWith('.new') && !f.includes('0123456789abcdef'))).toEqual([]);
    await held.release();
  });

  it('takes over the lock of a process that is gone', async () => {
    await writeFile(path, JSON.stringify({ pid: deadPid(), host: hostname(), token: 'dead' }));
    const held = await acquireLock(path, { pollMs: 10 });
    expect(JSON.parse(await readFile(path, 'utf8')).pid).toBe(process.pid);
    await held.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('takes over, at once, the fresh lock of an earlier process that had this pid (a restarted container is pid 1 again)', async () => {
    await writeFile(path, JSON.stringify({ pid: process.pid, host: hostname(), token: 'earlier-run' }));
    let waited = false;
    const held = await acquireLock(path, { pollMs: 10, onWait: () => (waited = true) });
    expect(waited).toBe(false);
    expect(JSON.parse(await readFile(path, 'utf8')).token).not.toBe('earlier-run');
    // A second holder in this same process still waits for the first.
    await waitsFor(held);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('takes over a lock whose heartbeat stopped', async () => {
    // A live pid, but on another host: only its age tells.
    await writeFile(path, JSON.stringify({ pid: process.pid, host: 'elsewhere', token: 'old' }));
    const past = new Date(Date.now() - 120_000);
    await utimes(path, past, past);
    const held = await acquireLock(path, { pollMs: 10, staleMs: 60_000 });
    await held.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('keeps a held lock fresh', async () => {
    const held = await acquireLock(path, { heartbeatMs: 20, staleMs: 200, pollMs: 10 });
    const past = new Date(Date.now() - 120_000);
    await utimes(path, past, past);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const controller = new AbortController();
    const other = acquireLock(path, { staleMs: 200, pollMs: 10, signal: controller.signal }).catch(
      () => 'aborted',
    );
    await new Promise((resolve) => setTimeout(resolve, 150));
    controller.abort();
    expect(await other).toBe('aborted');
    await held.release();
  });

  it('leaves alone a lock that is no longer its own', async () => {
    const held = await acquireLock(path);
    await writeFile(path, JSON.stringify({ pid: process.pid, host: hostname(), token: 'someone-else' }));
    await held.release();
    expect(existsSync(path)).toBe(true);
  });

  it('stops waiting when aborted', async () => {
    const held = await acquireLock(path);
    const controller = new AbortController();
    const waiting = acquireLock(path, { pollMs: 10, signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toThrow(/abort/i);
    await held.release();
  });
});
