import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';

import { listProcesses, readCmdline, readEnviron, readStat, type ProcStat } from './process-tree.js';

/**
 * Engines outlive an agent that crashes, is killed or restarts for an upgrade: they run in
 * process groups of their own and write their output to files, so nothing takes them
 * down. The supervisor records what it runs in a small file; the next agent reads it and
 * adopts each engine that still runs as recorded (a model that took ten minutes to load
 * keeps serving), and stops the ones of its own it cannot take over.
 *
 * A pid may have been reused since, by anything: a recorded process counts as ours only
 * if it started at the recorded time (same boot) and carries the recorded run token in
 * its environment. One that does not is left alone, whatever it is.
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
  /**
   * Its command line as /proc showed it once the engine was ready: a `bin` that is a wrapper
   * script exec'ing the engine (one that sets LD_LIBRARY_PATH, say) runs as another program.
   */
  cmdline?: string[];
  /** From /proc/PID/stat: with the boot id, it tells a reused pid apart. */
  startTime?: number;
  bootId?: string;
  /** The value of runTokenVariable in the process's environment. */
  run: string;
  /** The shard's run hash (run-hash.ts) when it was started: adopted only for the same run. Absent in records of older agents. */
  hash?: string;
  /** The shard's stop grace, for stopping it without its run. */
  stopGraceMs?: number;
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

  /** `kept`: records of an earlier agent's processes still running, kept until they are adopted or stopped. */
  constructor(file: string, kept: readonly RecordedProcess[] = []) {
    this.#file = file;
    for (const r of kept) this.#byKey.set(r.key, [...(this.#byKey.get(r.key) ?? []), r]);
    this.#save();
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

export function readStateFile(file: string): RecordedProcess[] {
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
    (v['hash'] === undefined || typeof v['hash'] === 'string') &&
    (v['startTime'] === undefined || Number.isInteger(v['startTime'])) &&
    (v['stopGraceMs'] === undefined || Number.isInteger(v['stopGraceMs'])) &&
    Array.isArray(v['command']) &&
    v['command'].every((a) => typeof a === 'string') &&
    (v['cmdline'] === undefined ||
      (Array.isArray(v['cmdline']) && v['cmdline'].every((a) => typeof a === 'string')))
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

function sameList(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);
}

/** What a recorded process is now, as /proc tells. */
export interface LiveProcess {
  stat: ProcStat | undefined;
  cmdline: string[] | undefined;
  /** Undefined when it cannot be read (another user's process). */
  environ: string[] | undefined;
}

/**
 * What to do with one recorded process:
 * - adopt: it is ours and runs as recorded;
 * - stop: it is ours (its start time and run token say so) but cannot be taken over;
 * - gone: nothing of it runs;
 * - foreign: its pid is another process's now, or cannot be told to be ours: left alone.
 */
export type RecordCheck = { verdict: 'adopt' } | { verdict: 'stop' | 'gone' | 'foreign'; reason: string };

export function checkRecord(r: RecordedProcess, live: LiveProcess, bootId: string | undefined): RecordCheck {
  if (r.bootId !== undefined && bootId !== undefined && r.bootId !== bootId)
    return { verdict: 'gone', reason: 'it was recorded before the machine restarted' };
  const { stat } = live;
  if (stat === undefined || stat.state === 'Z') return { verdict: 'gone', reason: 'it has exited' };
  if (r.startTime === undefined)
    return {
      verdict: 'foreign',
      reason: `its start time was not recorded, so pid ${r.pid} cannot be told to be it`,
    };
  if (stat.startTime !== r.startTime)
    return { verdict: 'foreign', reason: `pid ${r.pid} is another process now (it started at another time)` };
  if (live.environ === undefined)
    return {
      verdict: 'foreign',
      reason: `the environment of pid ${r.pid} cannot be read, so it cannot be told to be ours`,
    };
  if (!live.environ.includes(`${runTokenVariable}=${r.run}`))
    return { verdict: 'foreign', reason: `pid ${r.pid} does not carry the recorded run token` };
  if (
    live.cmdline === undefined ||
    !(commandMatches(r.command, live.cmdline) || sameList(r.cmdline, live.cmdline))
  )
    return { verdict: 'stop', reason: 'its command line is not the recorded one' };
  if (stat.pgrp !== r.pgid) return { verdict: 'stop', reason: 'it left its process group' };
  if (r.hash === undefined)
    return { verdict: 'stop', reason: 'it was started by an agent that did not record what it runs' };
  return { verdict: 'adopt' };
}

/** One shard's recorded processes, all still running as recorded (adopt) or ours to stop. */
export interface FoundShard {
  key: string;
  processes: RecordedProcess[];
  /** Set for a shard to stop: why it cannot be adopted. */
  reason?: string;
}

/** What an agent finds at its start of what the earlier one ran. */
export interface Survey {
  adoptable: FoundShard[];
  /** Ours, not adoptable: to be stopped (the processes listed only, those still ours). */
  stale: FoundShard[];
  /** Recorded pids that are another process's now: not touched. */
  foreign: { key: string; pid: number; reason: string }[];
  /** Workers left by an engine whose leader is gone, found by their run token: killed at once. */
  orphans: { key: string; pids: number[] }[];
}

/** Reads `stateFile` and checks every recorded process against what runs now. */
export function survey(stateFile: string, read: (pid: number) => LiveProcess = readLive): Survey {
  const recorded = readStateFile(stateFile);
  const out: Survey = { adoptable: [], stale: [], foreign: [], orphans: [] };
  if (recorded.length === 0) return out;
  const bootId = readBootId();
  const byKey = new Map<string, RecordedProcess[]>();
  for (const r of recorded) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r]);
  const withoutLeader: RecordedProcess[] = [];
  for (const [key, processes] of byKey) {
    const checks = processes.map((r) => ({ r, check: checkRecord(r, read(r.pid), bootId) }));
    const ours = checks.filter((c) => c.check.verdict === 'adopt' || c.check.verdict === 'stop');
    for (const c of checks) {
      if (c.check.verdict === 'foreign') out.foreign.push({ key, pid: c.r.pid, reason: c.check.reason });
      if (c.check.verdict === 'foreign' || c.check.verdict === 'gone') withoutLeader.push(c.r);
    }
    if (checks.every((c) => c.check.verdict === 'adopt')) {
      out.adoptable.push({ key, processes });
      continue;
    }
    const why = checks.find((c) => c.check.verdict !== 'adopt')?.check;
    if (ours.length > 0)
      out.stale.push({
        key,
        processes: ours.map((c) => c.r),
        reason: why !== undefined && 'reason' in why ? why.reason : 'it cannot be adopted',
      });
  }
  // Workers whose leader died first, or that left its group: their environment says whose they are.
  if (withoutLeader.length > 0) {
    const byToken = new Map(withoutLeader.map((r) => [`${runTokenVariable}=${r.run}`, r]));
    const found = new Map<string, number[]>();
    for (const p of listProcesses()) {
      if (p.pid === process.pid) continue;
      const token = readEnviron(p.pid)?.find((e) => byToken.has(e));
      const r = token === undefined ? undefined : byToken.get(token);
      if (r === undefined || recorded.some((x) => x.pid === p.pid && x.run === r.run)) continue;
      found.set(r.key, [...(found.get(r.key) ?? []), p.pid]);
    }
    for (const [key, pids] of found) out.orphans.push({ key, pids });
  }
  return out;
}

function readLive(pid: number): LiveProcess {
  return { stat: readStat(pid), cmdline: readCmdline(pid), environ: readEnviron(pid) };
}

/** SIGKILL to each pid (orphaned workers: no grace, their engine is gone already). */
export function killOrphans(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already, or not ours to kill.
    }
  }
}
