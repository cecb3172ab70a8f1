import { describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../../catalog/model-spec.js';

import { chooseProfile } from './kube-fleet.js';

const profile = (name: string, p: Partial<ProfileSpec>): ProfileSpec => ({
  name,
  engine: 'vllm',
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  nodes: 1,
  args: [],
  env: {},
  adapters: [],
  ...p,
});
const spec: ModelSpec = {
  name: 'qwen',
  source: 'hf:Qwen/Qwen3-8B',
  replicas: 1,
  profiles: [
    profile('h100', { gpu_class: 'h100-80g' }),
    profile('mig', { gpu_class: 'a100-80g-mig-3g.40gb' }),
    profile('cpu', { engine: 'llamacpp', cpu: true, gpus_per_node: 0 }),
  ],
};

describe('chooseProfile', () => {
  it.each([
    ['the first whose class the nodes offer', ['h100-80g', 'a100-80g-mig-3g.40gb'], [], 'h100'],
    ['a MIG class offered', ['a100-80g-mig-3g.40gb'], [], 'mig'],
    ['a CPU profile when no class is offered', [], [], 'cpu'],
    ['the one already running, whatever is offered', ['h100-80g'], ['llmgw-qwen-mig'], 'mig'],
  ])('%s', (_, offered, existing, want) => {
    const chosen = chooseProfile(spec, new Set(offered), new Map(existing.map((n) => [n, {}])));
    expect(chosen.name).toBe(want);
  });

  it('falls back to the first profile, whose pods then wait', () => {
    const gpuOnly = { ...spec, profiles: spec.profiles.slice(0, 2) };
    expect(chooseProfile(gpuOnly, new Set(), new Map()).name).toBe('h100');
  });
});
