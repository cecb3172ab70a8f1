import { isCpuProfile, type ProfileSpec } from '../catalog/model-spec.js';

import { resourceOf } from './node-classes.js';
import { parseQuantity } from './quantity.js';

/**
 * What an engine container asks of its node besides GPUs, and the size of its /dev/shm.
 * Without requests a pod is BestEffort: evicted first under memory pressure, and refused by a
 * namespace whose ResourceQuota counts requests. Pure: table-tested in pod-resources.test.ts.
 */

/** `kubernetes.resources`: Kubernetes quantities, '' for what llmgw counts. */
export interface ResourceSettings {
  cpu: string;
  memory: string;
}

export interface PodResources {
  requests: Record<string, string>;
  /** GPUs always; memory only where the settings give it (then the engine's use is known). */
  limits: Record<string, string>;
  /** The in-memory /dev/shm's sizeLimit. */
  shm: string;
  /** CPU threads a CPU engine is told to use (its request); undefined on GPUs. */
  threads: number | undefined;
}

/**
 * A GPU pod's host side, per device (card or MIG instance): vLLM, SGLang and TensorRT-LLM run
 * one worker process per card, each with a CUDA context, its framework and pinned transfer
 * buffers (a few GiB resident), beside an API server and a scheduler; llama.cpp keeps the
 * token embeddings in RAM. The planner counts card memory only, so these are defaults.
 */
export const gpuPodMemoryMib = { base: 2048, perDevice: 4096 };
export const gpuPodCpus = { base: 2, perDevice: 1 };
/** NCCL's and the engines' shared-memory transport between the ranks on a node. */
export const shmMibPerDevice = 2048;
/** A CPU engine's /dev/shm: llama.cpp keeps nothing there. */
export const cpuShmMib = 1024;
/** Threads of a CPU engine when kubernetes.resources.cpu is unset (the node's count is not known). */
export const defaultPodThreads = 4;
/** A CPU engine's KV cache and compute buffers beyond its weights when the model's shape is not known. */
export const cpuOverheadMib = 1024;

const MIB = 2 ** 20;

export function podResources(o: {
  profile: ProfileSpec;
  /** The bytes of the model's files (the origin's), which a CPU engine maps into RAM. */
  weightsBytes: number;
  settings: ResourceSettings | undefined;
}): PodResources {
  const { profile } = o;
  const cpuSetting = o.settings?.cpu ?? '';
  const memorySetting = o.settings?.memory ?? '';
  const limits: Record<string, string> = {};
  const requests: Record<string, string> = {};
  let memoryMib: number;
  let cpus: number;
  let threads: number | undefined;
  let shmMib: number;
  if (isCpuProfile(profile) || profile.gpu_class === undefined) {
    threads = cpuSetting === '' ? defaultPodThreads : Math.max(1, Math.ceil(parseQuantity(cpuSetting)));
    cpus = threads;
    // Placement's floor (min_memory_gb, or 1 GiB: src/placement/need.ts), or the weights it maps and some more.
    const floor = profile.min_memory_gb === undefined ? 1024 : Math.ceil(profile.min_memory_gb * 1024);
    memoryMib = Math.max(floor, Math.ceil(o.weightsBytes / MIB) + cpuOverheadMib);
    shmMib = cpuShmMib;
  } else {
    const gpu = resourceOf(profile.gpu_class, profile.gpus_per_node);
    requests[gpu.resource] = String(gpu.count);
    limits[gpu.resource] = String(gpu.count);
    cpus = gpuPodCpus.base + gpuPodCpus.perDevice * gpu.count;
    memoryMib = gpuPodMemoryMib.base + gpuPodMemoryMib.perDevice * gpu.count;
    shmMib = shmMibPerDevice * gpu.count;
  }
  requests['cpu'] = cpuSetting === '' ? String(cpus) : cpuSetting;
  requests['memory'] = memorySetting === '' ? `${memoryMib}Mi` : memorySetting;
  if (memorySetting !== '') limits['memory'] = memorySetting;
  return { requests, limits, shm: `${shmMib}Mi`, threads };
}
