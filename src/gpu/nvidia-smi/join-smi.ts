import { cardClass } from '../classes.js';
import type { Card, GpuInventory, GpuProcess, MigInstance } from '../types.js';
import type { ListedGpu, ListedInstance } from './parse-list.js';
import type { QueriedGpu, QueriedInstance, QueriedProcess, SmiQuery } from './parse-query.js';

export interface JoinedSmi extends Omit<GpuInventory, 'method' | 'reasons'> {
  /**
   * MIG devices only one of the two outputs showed: instances carved or destroyed between
   * the two runs. They are left out (an instance without a UUID cannot be given to CUDA).
   */
  unmatched: string[];
}

/**
 * Cards from the XML, which has everything about them; each card's MIG devices get their
 * UUID and profile from `-L`. Cards pair by UUID (by position when `-L` lacks it); MIG
 * devices by GI/CI ids where the old `-L` UUIDs carry them, else by `Device N` = `<index>`.
 */
export function joinSmi(list: readonly ListedGpu[], query: SmiQuery): JoinedSmi {
  const unmatched: string[] = [];
  const cards = query.gpus.map((gpu, position): Card => {
    const listed = list.find((l) => l.uuid !== '' && l.uuid === gpu.uuid) ?? list[position];
    const index = listed?.uuid === gpu.uuid ? listed.index : position;
    const name = gpu.name !== '' ? gpu.name : (listed?.name ?? '');
    const instances: MigInstance[] = [];
    const listedInstances = listed?.instances ?? [];
    for (const q of gpu.instances) {
      const l = listedInstances.find((candidate) => sameInstance(candidate, q));
      if (l === undefined) {
        unmatched.push(
          `GPU ${index} MIG device ${q.index} (GI ${q.gpuInstanceId}, CI ${q.computeInstanceId}) is not in nvidia-smi -L`,
        );
        continue;
      }
      instances.push(instance(q, l, gpu.processes));
    }
    for (const l of listedInstances) {
      if (!gpu.instances.some((q) => sameInstance(l, q))) {
        unmatched.push(`GPU ${index} MIG device ${l.index} (${l.uuid}) is not in nvidia-smi -q -x`);
      }
    }
    return card(gpu, { index, name, instances });
  });
  const joined: JoinedSmi = { cards, unmatched };
  if (query.driverVersion !== undefined) joined.driver_version = query.driverVersion;
  if (query.cudaVersion !== undefined) joined.cuda_version = query.cudaVersion;
  return joined;
}

function sameInstance(l: ListedInstance, q: QueriedInstance): boolean {
  if (l.gpuInstanceId !== undefined && l.computeInstanceId !== undefined) {
    return l.gpuInstanceId === q.gpuInstanceId && l.computeInstanceId === q.computeInstanceId;
  }
  return l.index === q.index;
}

function instance(q: QueriedInstance, l: ListedInstance, processes: readonly QueriedProcess[]): MigInstance {
  return {
    index: l.index,
    uuid: l.uuid,
    profile: l.profile,
    gpu_instance_id: q.gpuInstanceId,
    compute_instance_id: q.computeInstanceId,
    // A MIG device whose memory reads N/A (seen inside restricted containers) offers none
    // that placement can count on.
    memory_total_mib: q.memoryTotalMib ?? 0,
    memory_used_mib: q.memoryUsedMib ?? 0,
    processes: processes
      .filter((p) => p.gpuInstanceId === q.gpuInstanceId && p.computeInstanceId === q.computeInstanceId)
      .map(gpuProcess),
  };
}

function card(gpu: QueriedGpu, joined: Pick<Card, 'index' | 'name' | 'instances'>): Card {
  const memoryTotal = gpu.memoryTotalMib ?? 0;
  const onInstance = (p: QueriedProcess): boolean =>
    joined.instances.some(
      (i) => i.gpu_instance_id === p.gpuInstanceId && i.compute_instance_id === p.computeInstanceId,
    );
  const result: Card = {
    index: joined.index,
    uuid: gpu.uuid,
    name: joined.name,
    class: cardClass(joined.name, memoryTotal),
    pci_bus_id: gpu.busId,
    memory_total_mib: memoryTotal,
    memory_used_mib: gpu.memoryUsedMib ?? 0,
    wear: gpu.wear,
    processes: gpu.processes.filter((p) => !onInstance(p)).map(gpuProcess),
    instances: joined.instances,
  };
  if (gpu.temperatureC !== undefined) result.temperature_c = gpu.temperatureC;
  if (gpu.powerW !== undefined) result.power_w = gpu.powerW;
  if (gpu.powerLimitW !== undefined) result.power_limit_w = gpu.powerLimitW;
  // In MIG mode the driver does not measure the card's utilization; whatever a driver
  // might print there would not describe any one instance.
  if (gpu.utilizationPct !== undefined && gpu.mig?.current !== true)
    result.utilization_pct = gpu.utilizationPct;
  if (gpu.mig !== undefined) result.mig = gpu.mig;
  return result;
}

function gpuProcess(p: QueriedProcess): GpuProcess {
  return { pid: p.pid, name: p.name, memory_mib: p.memoryMib };
}
