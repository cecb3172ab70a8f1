import { describe, expect, it } from 'vitest';

import type { ProfileSpec } from '../catalog/model-spec.js';

import { podResources } from './pod-resources.js';

const cpu: ProfileSpec = {
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
};

describe('podResources', () => {
  it.each([
    // [cpu setting, the request, the threads]
    ['', '4', 4],
    ['8', '8', 8],
    ['500m', '500m', 1],
    ['2.5', '2.5', 3],
  ])('cpu "%s" requests %s and runs %i threads', (setting, request, threads) => {
    const r = podResources({ profile: cpu, weightsBytes: 0, settings: { cpu: setting, memory: '' } });
    expect(r.requests['cpu']).toBe(request);
    expect(r.threads).toBe(threads);
  });

  it('counts 1 GiB (placement’s floor) for a CPU model of no known size, with no limit', () => {
    const r = podResources({ profile: cpu, weightsBytes: 0, settings: undefined });
    expect(r.requests).toEqual({ cpu: '4', memory: '1024Mi' });
    expect(r.limits).toEqual({});
  });
});
