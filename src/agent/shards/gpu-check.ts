/**
 * Whether an engine placed on GPUs really uses them. A llama.cpp built without a GPU
 * backend ignores `--n-gpu-layers`, serves from the CPU and looks healthy; so does a
 * container whose GPUs the runtime did not pass through. Only the driver's list of
 * processes holding memory on each device gives it away.
 */

import type { GpuProcessReader } from './types.js';
import { wait } from './wait.js';

/** Whether any of `pids` holds memory on any of `uuids`. */
export function holdsGpuMemory(
  pids: readonly number[],
  uuids: readonly string[],
  holders: ReadonlyMap<string, readonly number[]>,
): boolean {
  const ours = new Set(pids);
  return uuids.some((uuid) => (holders.get(uuid) ?? []).some((pid) => ours.has(pid)));
}

/** `fix`: what to do about it, which depends on how the engine runs (its driver says). */
export function noGpuMemoryReason(uuids: readonly string[], fix: string): string {
  const where = uuids.length === 1 ? `its GPU (${uuids.join(', ')})` : `its GPUs (${uuids.join(', ')})`;
  return `the engine holds no memory on ${where}: it is running on the CPU, about ten times slower — ${fix}`;
}

export interface GpuMemoryWatch {
  uuids: readonly string[];
  reader: GpuProcessReader;
  /** The engine's processes now (host pids, as the driver reports them). */
  pids: () => readonly number[];
  /** The first check waits this long (the engine allocates after it answers health). */
  delayMs: number;
  intervalMs: number;
  signal: AbortSignal;
  /** Told each check's answer. */
  onCheck: (holds: boolean) => void;
}

/** Checks, after a delay and then now and again until `signal`, that the engine holds memory on its GPUs. */
export async function watchGpuMemory(w: GpuMemoryWatch): Promise<void> {
  if (!(await wait(w.delayMs, w.signal))) return;
  for (;;) {
    let holders: Map<string, number[]> | undefined;
    try {
      holders = await w.reader();
    } catch {
      // Discovery failing says nothing about the engine: leave the state as it is.
    }
    if (w.signal.aborted) return;
    if (holders !== undefined) w.onCheck(holdsGpuMemory(w.pids(), w.uuids, holders));
    if (!(await wait(w.intervalMs, w.signal))) return;
  }
}
