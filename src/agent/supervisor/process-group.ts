import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

import type { ProcessSpec } from '../../engines/types.js';
import { LineSplitter } from './log-buffer.js';
import { groupAlive, groupMembers } from './process-tree.js';

/**
 * One engine process in a process group of its own (`detached: true` makes it a session
 * and group leader), so that signals reach the workers it forks — vLLM's engine core and
 * tensor-parallel workers — and no process of another shard.
 */

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The process could not be started at all; the message says why, for a user. */
export class SpawnError extends Error {
  readonly bin: string;
  readonly errno: string | undefined;

  constructor(bin: string, cause: unknown) {
    const errno = (cause as NodeJS.ErrnoException | undefined)?.code;
    super(spawnFailure(bin, errno, cause), { cause });
    this.name = 'SpawnError';
    this.bin = bin;
    this.errno = errno;
  }
}

function spawnFailure(bin: string, errno: string | undefined, cause: unknown): string {
  if (errno === 'ENOENT') {
    // A script whose `#!` interpreter is missing fails with ENOENT too.
    return bin.includes('/') && existsSync(bin)
      ? `cannot start ${bin}: the interpreter on its #! line is not found`
      : `cannot start ${bin}: not found`;
  }
  if (errno === 'EACCES') return `cannot start ${bin}: permission denied (is it executable?)`;
  return `cannot start ${bin}: ${cause instanceof Error ? cause.message : String(cause)}`;
}

/** How a stop went: on SIGTERM, after SIGKILL, or not at all (a process stuck in the kernel). */
export type StopOutcome = 'exited' | 'killed' | 'stuck';

const POLL_MS = 25;
/** After SIGKILL, how long to wait for the kernel to reap before reporting the group stuck. */
const KILL_WAIT_MS = 10_000;

export interface SpawnOptions {
  spec: ProcessSpec;
  env: NodeJS.ProcessEnv;
  /** Each line the process writes, stdout and stderr interleaved as they arrive. */
  onLine: (line: string) => void;
}

export class ProcessGroup {
  readonly name: string;
  /** The leader's pid, which is also the group id. */
  readonly pid: number;
  /** Resolves when the leader has exited (its group may still hold workers). */
  readonly exited: Promise<Exit>;
  #exit: Exit | undefined;
  readonly #closed: Promise<void>;
  readonly #child: ChildProcessByStdio<null, Readable, Readable>;

  private constructor(
    name: string,
    child: ChildProcessByStdio<null, Readable, Readable>,
    pid: number,
    onLine: (line: string) => void,
  ) {
    this.name = name;
    this.#child = child;
    this.pid = pid;
    const out = new LineSplitter(onLine);
    const err = new LineSplitter(onLine);
    child.stdout.on('data', (d: Buffer) => {
      out.push(d);
    });
    child.stderr.on('data', (d: Buffer) => {
      err.push(d);
    });
    // A read error on a pipe must not take the agent down; the exit says what happened.
    child.stdout.on('error', () => undefined);
    child.stderr.on('error', () => undefined);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
    });
    this.#closed = new Promise((resolve) => {
      child.once('close', () => {
        out.flush();
        err.flush();
        resolve();
      });
    });
  }

  /** Starts the process; rejects with SpawnError when it cannot be started at all. */
  static spawn(options: SpawnOptions): Promise<ProcessGroup> {
    const { spec } = options;
    return new Promise((resolve, reject) => {
      let child: ChildProcessByStdio<null, Readable, Readable>;
      try {
        child = spawn(spec.bin, spec.args, {
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...options.env, ...spec.env },
        });
      } catch (e) {
        reject(new SpawnError(spec.bin, e));
        return;
      }
      // Later errors (a failed kill) are reported by the exit; without a listener they would throw.
      child.on('error', () => undefined);
      if (child.pid === undefined) {
        child.once('error', (e) => {
          reject(new SpawnError(spec.bin, e));
        });
        return;
      }
      resolve(new ProcessGroup(spec.name, child, child.pid, options.onLine));
    });
  }

  /** The leader's exit, once it has happened. */
  get exit(): Exit | undefined {
    return this.#exit;
  }

  /** The group's live processes, leader included. */
  members(): number[] {
    return groupMembers(this.pid);
  }

  /**
   * Sends a signal to every process of the group. A group already gone (ESRCH) is fine;
   * one whose processes are not ours to signal (EPERM) shows as not gone, and the stop says so.
   */
  signal(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch {
      // See above: the wait for the group to go tells the outcome.
    }
  }

  /** Whether the leader has exited and no other process of the group runs. */
  gone(): boolean {
    return this.#exit !== undefined && !groupAlive(this.pid);
  }

  /**
   * SIGTERM to the group, then SIGKILL after `graceMs` if any process still runs (a
   * llama-server with a non-streamed request in flight waits for its client forever).
   */
  async terminate(graceMs: number): Promise<StopOutcome> {
    if (this.gone()) return 'exited';
    this.signal('SIGTERM');
    if (await this.#waitGone(graceMs)) return 'exited';
    return this.kill();
  }

  /** SIGKILL to the group, and waits until it is gone. */
  async kill(): Promise<StopOutcome> {
    if (this.gone()) return 'exited';
    this.signal('SIGKILL');
    return (await this.#waitGone(KILL_WAIT_MS)) ? 'killed' : 'stuck';
  }

  /**
   * Resolves once the process's output is read to its end, or after `timeoutMs`: a
   * process that left the group may hold the pipes open, and must not hold the shard.
   */
  async drained(timeoutMs: number): Promise<void> {
    const timer = new AbortController();
    await Promise.race([
      this.#closed,
      sleep(timeoutMs, undefined, { signal: timer.signal }).catch(() => undefined),
    ]);
    timer.abort();
    this.#child.stdout.destroy();
    this.#child.stderr.destroy();
  }

  async #waitGone(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.gone()) return true;
      if (Date.now() >= deadline) return false;
      await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())));
    }
  }
}
