import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { isRunning, listProcesses, readCmdline, readEnviron, readStat } from './process-tree.js';

/**
 * Engines outlive an agent that crashes or is killed: they run in process groups of their
 * own, so nothing takes them down, and they keep the GPU memory and the port the next
 * agent's engines need (a new llama-server then fails with "couldn't bind"; a new vLLM
 * runs out of memory). The supervisor records what it runs in a small file; the next
 * agent kills what is recorded there before it starts anything.
 *
 * A pid may have been reused since, by anything: a recorded process is killed only if it
 * started at the recorded time (same boot) and its command line still matches.
 */

/**
 * Each engine process gets this variable, so its workers can be found even once the leader
 * is gone. Not named LLMGW_*: engines get none of llmgw's own variables (engine-env.ts).
 */
export const runTokenVariable = 'SHARD_RUN_TOKEN';

export interface RecordedProcess {
  /** The shard's key. */
  key: string;
  name: string;
  pid: number;
  /** The process group (the same as pid: each engine leads its own). */
  pgid: number;
  /** `[bin, ...args]` as spawned. */
  command: string[];
  /** From /proc/PID/stat: with the boot id, it tells a reused pid apart. */
  startTime?: number;
  bootId?: string;
  /** The value of runTokenVariable in the process's environment. */
  run: string;
}

interface StateFile {
  version: 1;
  processes: RecordedProcess[];
}

export function readBootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The supervisor's record of what it runs, rewritten (atomically) on every start and exit. */
export class ProcessRecord {
  readonly #file: string;
  readonly #byKey = new Map<string, RecordedProcess[]>();

  constructor(file: string) {
    this.#file = file;
  }

  set(key: string, processes: RecordedProcess[]): void {
    if (processes.length === 0) this.#byKey.delete(key);
    else this.#byKey.set(key, processes);
    this.#save();
  }

  #save(): void {
    const content: StateFile = { version: 1, processes: [...this.#byKey.values()].flat() };
    const tmp = `${this.#file}.${process.pid}.tmp`;
    try {
      mkdirSync(dirname(this.#file), { recursive: true });
      writeFileSync(tmp, `${JSON.stringify(content, null, 2)}\n`);
      renameSync(tmp, this.#file);
    } catch {
      // A safety net only: engines run whether or not it could be written.
    }
  }
}

function readStateFile(file: string): RecordedProcess[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    !('processes' in parsed) ||
    !Array.isArray(parsed.processes)
  )
    return [];
  return (parsed.processes as unknown[]).filter(isRecordedProcess);
}

function isRecordedProcess(value: unknown): value is RecordedProcess {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v['key'] === 'string' &&
    typeof v['name'] === 'string' &&
    Number.isInteger(v['pid']) &&
    Number.isInteger(v['pgid']) &&
    typeof v['run'] === 'string' &&
    Array.isArray(v['command']) &&
    v['command'].every((a) => typeof a === 'string')
  );
}

/**
 * Whether a live command line is the recorded one. The kernel rewrites the command of a
 * script: `vllm serve M` runs as `python3 /usr/bin/vllm serve M`, a `#!/usr/bin/env node`
 * script as `node /path/script.mjs …`. So the arguments must end the live line exactly and
 * the program (or its basename) appear before them.
 */
export function commandMatches(recorded: readonly string[], live: readonly string[]): boolean {
  const [bin, ...args] = recorded;
  if (bin === undefined || live.length <= args.length) return false;
  const head = live.slice(0, live.length - args.length);
  if (!args.every((a, i) => live[head.length + i] === a)) return false;
  return head.some((part) => part === bin || basename(part) === basename(bin));
}

export interface LeftoverKill {
  key: string;
  name: string;
  /** What was killed: the recorded process (and its group), and workers found by their run token. */
  pids: number[];
}

/**
 * Kills (SIGKILL, whole group) the engines an earlier agent recorded in `stateFile` that
 * still run, waits until they are gone, and removes the file. Call it once at agent start,
 * before any Supervisor starts engines.
 */
export async function killLeftovers(
  stateFile: string,
  options: { waitMs?: number } = {},
): Promise<LeftoverKill[]> {
  const recorded = readStateFile(stateFile);
  const bootId = readBootId();
  const killed: LeftoverKill[] = [];
  const processes = listProcesses();
  for (const r of recorded) {
    // After a reboot nothing recorded can be running, whatever the pid now is.
    if (r.bootId !== undefined && bootId !== undefined && r.bootId !== bootId) continue;
    const pids: number[] = [];
    const stat = readStat(r.pid);
    const cmdline = readCmdline(r.pid);
    const same =
      stat !== undefined &&
      stat.state !== 'Z' &&
      (r.startTime === undefined || stat.startTime === r.startTime) &&
      cmdline !== undefined &&
      commandMatches(r.command, cmdline);
    if (same) {
      const members = processes.filter((p) => p.pgrp === r.pgid).map((p) => p.pid);
      signal(stat.pgrp === r.pgid ? -r.pgid : r.pid);
      pids.push(r.pid, ...members.filter((m) => m !== r.pid));
    }
    // Workers whose leader died first, or that left its group: their environment says whose they are.
    for (const p of processes) {
      if (pids.includes(p.pid) || p.pid === process.pid) continue;
      if (readEnviron(p.pid)?.includes(`${runTokenVariable}=${r.run}`) === true) {
        signal(p.pid);
        pids.push(p.pid);
      }
    }
    if (pids.length > 0) killed.push({ key: r.key, name: r.name, pids });
  }
  const all = killed.flatMap((k) => k.pids);
  const deadline = Date.now() + (options.waitMs ?? 5000);
  while (all.some(isRunning) && Date.now() < deadline) await sleep(25);
  rmSync(stateFile, { force: true });
  return killed;
}

function signal(target: number): void {
  try {
    process.kill(target, 'SIGKILL');
  } catch {
    // Gone already, or not ours to kill.
  }
}
