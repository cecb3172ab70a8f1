import { isMigClass, parseGpuClass } from '../catalog/gpu-class.js';
import { isCpuProfile, type ProfileSpec } from '../catalog/model-spec.js';

import type { ShardDevice } from './types.js';

/**
 * The checks every engine makes of the devices one replica would get on one node: as
 * many as gpus_per_node, each of the profile's class, each once, and one alone on MIG.
 * Each message says what to change.
 */
export function checkDevices(profile: ProfileSpec, devices: readonly ShardDevice[]): string[] {
  const problems: string[] = [];
  const labels = devices.map((d) => d.label).join(', ');
  if (isCpuProfile(profile)) {
    if (devices.length > 0) {
      problems.push(
        `profile "${profile.name}" runs on CPUs (cpu: true) but was given GPU ${labels}: place it on no GPU, or write gpu_class instead of cpu: true`,
      );
    }
    return problems;
  }
  const cls = profile.gpu_class;
  if (cls === undefined) {
    problems.push(
      `profile "${profile.name}" says neither gpu_class nor cpu: true: write gpu_class (e.g. a100-80g) or cpu: true`,
    );
    return problems;
  }
  const mig = isMigClass(cls);
  if (mig && devices.length !== 1) {
    const card = parseGpuClass(cls)?.card ?? 'a whole-card class';
    problems.push(
      `${cls} is a MIG instance, and a replica runs on exactly one (a process opens one MIG device), but it was given ${devices.length}: ` +
        `place it on one instance, or use a whole-card class such as ${card} for more`,
    );
  } else if (!mig && devices.length !== profile.gpus_per_node) {
    problems.push(
      `profile "${profile.name}" takes ${profile.gpus_per_node} GPU(s) per node (gpus_per_node: ${profile.gpus_per_node}) but was given ` +
        `${devices.length}${devices.length > 0 ? ` (${labels})` : ''}: place it on ${profile.gpus_per_node} ${cls} device(s), or write gpus_per_node: ${Math.max(devices.length, 1)}`,
    );
  }
  for (const d of devices) {
    if (d.class !== cls) {
      problems.push(
        `device ${d.label} is ${d.class}, not the profile's ${cls}: place it on ${cls} devices, or write gpu_class: ${d.class}`,
      );
    }
  }
  const seen = new Set<string>();
  for (const d of devices) {
    if (seen.has(d.uuid)) problems.push(`device ${d.label} was given twice: a shard takes each device once`);
    seen.add(d.uuid);
  }
  return problems;
}

/** Refusal of a CPU profile, for the engines llmgw runs on GPUs only. */
export function gpuOnly(engine: string, profile: ProfileSpec): string[] {
  return isCpuProfile(profile)
    ? [
        `${engine} does not run on CPUs under llmgw: write engine: llamacpp for cpu: true, or give a gpu_class`,
      ]
    : [];
}
