import type { ProfileSpec } from '../../src/catalog/model-spec.js';

/**
 * Profiles as the catalog stores them (defaults filled in), for tests: one card of a class, or
 * CPUs; what a test cares about goes in `more`.
 */
export function gpuProfile(more: Partial<ProfileSpec> = {}): ProfileSpec {
  return {
    name: 'gpu',
    engine: 'vllm',
    gpu_class: 'l4-24g',
    tp: 1,
    pp: 1,
    gpus_per_node: 1,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    ...more,
  };
}

export function cpuProfile(more: Partial<ProfileSpec> = {}): ProfileSpec {
  return {
    name: 'cpu',
    engine: 'llamacpp',
    cpu: true,
    tp: 1,
    pp: 1,
    gpus_per_node: 0,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    ...more,
  };
}
