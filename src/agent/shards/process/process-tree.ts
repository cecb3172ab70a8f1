import { readdirSync, readFileSync } from 'node:fs';

/**
 * What Linux says about processes, read from /proc. Zombies count as gone everywhere
 * here: an engine's orphaned worker that died is reparented to PID 1, and where PID 1 is
 * not a reaper (some container and VM inits) it stays a zombie forever, which
 * `kill(pid, 0)` still reports as alive.
 */

export interface ProcStat {
  pid: number;
  /** R, S, D, Z, T, ... */
  state: string;
  ppid: number;
  pgrp: number;
  /** Clock ticks after boot: with the pid, it names one process for the whole boot. */
  startTime: number;
}

/** /proc/PID/stat, or undefined when the process is gone (or /proc is absent). */
export function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name sits in parentheses and may itself hold spaces and ')': the fields
  // start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // Fields after the name, from 0: state, ppid, pgrp, session, ..., starttime at 19.
  const state = fields[0];
  if (state === undefined) return undefined;
  return { pid, state, ppid: Number(fields[1]), pgrp: Number(fields[2]), startTime: Number(fields[19]) };
}

/** Every process but zombies. Empty where there is no /proc. */
export function listProcesses(): ProcStat[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: ProcStat[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    if (stat !== undefined && stat.state !== 'Z') out.push(stat);
  }
  return out;
}

/** Whether the process exists and is not a zombie. */
export function isRunning(pid: number): boolean {
  const stat = readStat(pid);
  if (stat !== undefined) return stat.state !== 'Z';
  if (process.platform === 'linux') return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The live members of a process group. */
export function groupMembers(pgid: number, processes: readonly ProcStat[] = listProcesses()): number[] {
  return processes.filter((p) => p.pgrp === pgid).map((p) => p.pid);
}

/** Whether any member of the group still runs (zombies aside). */
export function groupAlive(pgid: number): boolean {
  if (process.platform !== 'linux') {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  return groupMembers(pgid).length > 0;
}

/** The pid and every descendant of it, children first found by their parent pid. */
export function processTree(pid: number, processes: readonly ProcStat[] = listProcesses()): number[] {
  const children = new Map<number, number[]>();
  for (const p of processes) {
    const list = children.get(p.ppid);
    if (list === undefined) children.set(p.ppid, [p.pid]);
    else list.push(p.pid);
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    const current = out[i];
    if (current === undefined) break;
    for (const child of children.get(current) ?? []) if (!out.includes(child)) out.push(child);
  }
  return out;
}

/** The argument vector of a running process; undefined when it is gone or unreadable. */
export function readCmdline(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (raw === '') return undefined;
    return raw.replace(/\0$/, '').split('\0');
  } catch {
    return undefined;
  }
}

/** The environment a process was started with (NAME=value entries); undefined when unreadable. */
export function readEnviron(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter((e) => e !== '');
  } catch {
    return undefined;
  }
}
