import { isMigClass, parseGpuClass } from '../catalog/gpu-class.js';
import { isCpuProfile, type ProfileSpec } from '../catalog/model-spec.js';

/** RAM a CPU shard reserves when its profile gives no min_memory_gb. */
export const defaultCpuMemoryMib = 1024;

/** What one replica of a profile takes, or why placement refuses the profile outright. */
export type Need =
  | { kind: 'refused'; reason: string }
  /** `perNode` whole cards of `cls` on each of `nodes` distinct nodes. */
  | { kind: 'cards'; cls: string; perNode: number; nodes: number }
  /** Exactly one MIG instance of `cls`. */
  | { kind: 'instance'; cls: string }
  | { kind: 'cpu'; memoryMib: number };

/** The pool of candidate nodes a need draws from; one per device class and kind, and one for CPUs. */
export function poolKey(need: Exclude<Need, { kind: 'refused' }>): string {
  switch (need.kind) {
    case 'cards':
      return `card:${need.cls}`;
    case 'instance':
      return `mig:${need.cls}`;
    case 'cpu':
      return 'cpu';
  }
}

export function cpuMemoryMib(p: Pick<ProfileSpec, 'min_memory_gb'>): number {
  return p.min_memory_gb === undefined ? defaultCpuMemoryMib : Math.ceil(p.min_memory_gb * 1024);
}

/**
 * Reads a profile as placement sees it. The catalog checks the same rules, but profiles can
 * reach placement from an older database or another writer, so the MIG rule is checked
 * again here: a process opens one MIG device, and instances have no NVLink between them.
 */
export function needOf(p: ProfileSpec): Need {
  if (isCpuProfile(p)) return { kind: 'cpu', memoryMib: cpuMemoryMib(p) };
  const cls = p.gpu_class;
  if (cls === undefined) {
    return {
      kind: 'refused',
      reason: 'the profile names no gpu_class and is not cpu: true, so it has nowhere to run',
    };
  }
  if (isMigClass(cls)) {
    const over = (['tp', 'pp', 'gpus_per_node', 'nodes'] as const)
      .filter((k) => p[k] > 1)
      .map((k) => `${k} ${p[k]}`);
    if (over.length > 0) {
      const card = parseGpuClass(cls)?.card ?? cls;
      return {
        kind: 'refused',
        reason:
          `${cls} is a MIG instance and a replica on MIG runs on exactly one instance, but the profile asks for ` +
          `${over.join(', ')}: set them to 1, or use a whole-card class such as ${card}`,
      };
    }
    return { kind: 'instance', cls };
  }
  if (
    !(p.gpus_per_node >= 1) ||
    !(p.nodes >= 1) ||
    !Number.isInteger(p.gpus_per_node) ||
    !Number.isInteger(p.nodes)
  ) {
    return {
      kind: 'refused',
      reason: `the profile asks for gpus_per_node ${p.gpus_per_node} on nodes ${p.nodes}: a GPU replica takes at least one card on at least one node`,
    };
  }
  return { kind: 'cards', cls, perNode: p.gpus_per_node, nodes: p.nodes };
}
