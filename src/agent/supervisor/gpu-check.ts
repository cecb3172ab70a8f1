/**
 * Whether an engine placed on GPUs really uses them. A llama.cpp built without a GPU
 * backend ignores `--n-gpu-layers`, serves from the CPU and looks healthy; only the
 * driver's list of processes holding memory on each device gives it away.
 */

/** Whether any of `pids` holds memory on any of `uuids`. */
export function holdsGpuMemory(
  pids: readonly number[],
  uuids: readonly string[],
  holders: ReadonlyMap<string, readonly number[]>,
): boolean {
  const ours = new Set(pids);
  return uuids.some((uuid) => (holders.get(uuid) ?? []).some((pid) => ours.has(pid)));
}

export function noGpuMemoryReason(uuids: readonly string[]): string {
  const where = uuids.length === 1 ? `its GPU (${uuids.join(', ')})` : `its GPUs (${uuids.join(', ')})`;
  return (
    `the engine holds no memory on ${where}: it is running on the CPU, about ten times slower — ` +
    'use a GPU build of the engine (llama.cpp: the Vulkan or a CUDA archive), or check the driver'
  );
}
