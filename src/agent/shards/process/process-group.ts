import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import type { ProcessSpec } from '../../../engines/types.js';
import { groupAlive, groupMembers, readStat } from './process-tree.js';

/**
 * One engine process in a process group of its own (`detached: true` makes it a session
 * and group leader), so that signals reach the workers it forks — vLLM's engine core and
 * tensor-parallel workers — and no process of another shard. Either spawned here, or
 * adopted: started by an earlier agent of this node and taken over as it runs.
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
  /** The file its stdout and stderr are appended to (see LogBuffer: no pipe, so it outlives the agent). */
  logFile: string;
}

/** What a group was started with, as recorded for the next agent: see leftovers.ts. */
export interface Adoptable {
  name: string;
  pid: number;
  /** From /proc/PID/stat: with the pid, names the process for the whole boot. */
  startTime: number;
  /** The run token in its environment. */
  run: string;
}

/** How often an adopted process (not a child: no exit event) is looked at. */
const ADOPTED_POLL_MS = 100;

export class ProcessGroup {
  readonly name: string;
  /** The leader's pid, which is also the group id. */
  readonly pid: number;
  /** The leader's start time (/proc/PID/stat), when it could be read. */
  readonly startTime: number | undefined;
  /** Started by an earlier agent and taken over: its exit status cannot be known. */
  readonly adopted: boolean;
  /** Resolves when the leader has exited (its group may still hold workers). */
  readonly exited: Promise<Exit>;
  #exit: Exit | undefined;
  readonly #child: ChildProcess | undefined;
  #poll: NodeJS.Timeout | undefined;

  private constructor(name: string, pid: number, child: ChildProcess | undefined, startTime?: number) {
    this.name = name;
    this.pid = pid;
    this.#child = child;
    this.adopted = child === undefined;
    this.startTime = startTime ?? readStat(pid)?.startTime;
    this.exited = new Promise((resolve) => {
      const done = (exit: Exit) => {
        if (this.#exit !== undefined) return;
        this.#exit = exit;
        if (this.#poll !== undefined) clearInterval(this.#poll);
        resolve(exit);
      };
      if (child !== undefined) {
        child.once('exit', (code, signal) => {
          done({ code, signal });
        });
        return;
      }
      // Not our child: the kernel tells its parent (init, now) of the exit, so look for it.
      const check = () => {
        const stat = readStat(pid);
        if (stat === undefined || stat.state === 'Z' || stat.startTime !== this.startTime)
          done({ code: null, signal: null });
      };
      this.#poll = setInterval(check, ADOPTED_POLL_MS);
      check();
    });
  }

  /** Starts the process; rejects with SpawnError when it cannot be started at all. */
  static spawn(options: SpawnOptions): Promise<ProcessGroup> {
    const { spec } = options;
    return new Promise((resolve, reject) => {
      let child: ChildProcess;
      let out: number;
      try {
        out = openSync(options.logFile, 'a');
      } catch (e) {
        reject(
          new SpawnError(spec.bin, new Error(`cannot open its log file ${options.logFile}: ${String(e)}`)),
        );
        return;
      }
      try {
        child = spawn(spec.bin, spec.args, {
          detached: true,
          stdio: ['ignore', out, out],
          env: { ...options.env, ...spec.env },
        });
      } catch (e) {
        reject(new SpawnError(spec.bin, e));
        return;
      } finally {
        // The child has its own copy.
        closeSync(out);
      }
      // Later errors (a failed kill) are reported by the exit; without a listener they would throw.
      child.on('error', () => undefined);
      const pid = child.pid;
      if (pid === undefined) {
        child.once('error', (e) => {
          reject(new SpawnError(spec.bin, e));
        });
        return;
      }
      resolve(new ProcessGroup(spec.name, pid, child));
    });
  }

  /** Takes over a process an earlier agent started (checked against its record first: leftovers.ts). */
  static adopt(p: Adoptable): ProcessGroup {
    return new ProcessGroup(p.name, p.pid, undefined, p.startTime);
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

  /** Lets the process run on without this agent (it exits, another adopts the process): nothing here waits for it. */
  release(): void {
    this.#child?.unref();
    if (this.#poll !== undefined) clearInterval(this.#poll);
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
