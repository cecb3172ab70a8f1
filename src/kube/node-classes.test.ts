import { describe, expect, it } from 'vitest';

import type { KNode, KPod } from './kube-types.js';
import { classOfLabels, kubeNodeView, offersOf, resourceOf } from './node-classes.js';
import { parseQuantity } from './quantity.js';

const gfd = (product: string, memory: number) => ({
  'nvidia.com/gpu.product': product,
  'nvidia.com/gpu.memory': String(memory),
});

function node(name: string, labels: Record<string, string>, allocatable: Record<string, string>): KNode {
  return {
    metadata: { name, uid: `uid-${name}`, labels },
    spec: {},
    status: {
      allocatable: { cpu: '64', memory: '263724056Ki', ...allocatable },
      conditions: [{ type: 'Ready', status: 'True' }],
      addresses: [{ type: 'InternalIP', address: '10.0.0.5' }],
      nodeInfo: { kubeletVersion: 'v1.31.2', osImage: 'Ubuntu 22.04', architecture: 'amd64' } as never,
    },
  };
}

describe('classOfLabels: the same names as the agents’ discovery', () => {
  it.each([
    ['NVIDIA-H100-80GB-HBM3', 81559, 'h100-80g'],
    ['NVIDIA-H100-PCIe', 81559, 'h100-80g'],
    ['NVIDIA-A100-SXM4-80GB', 81920, 'a100-80g'],
    ['NVIDIA-A100-SXM4-40GB', 40960, 'a100-40g'],
    ['NVIDIA-L4', 23034, 'l4-24g'],
    ['Tesla-T4', 15360, 't4-16g'],
    ['NVIDIA-H200', 143771, 'h200-141g'],
    // The single MIG strategy puts the instance into the product: the card decides.
    ['NVIDIA-A100-SXM4-80GB-MIG-3g.40gb', 81920, 'a100-80g'],
  ])('%s with %i MiB is %s', (product, memory, want) => {
    expect(classOfLabels(gfd(product, memory))).toBe(want);
  });

  it('is undefined without GPU feature discovery', () => {
    expect(classOfLabels({})).toBeUndefined();
  });
});

describe('offersOf', () => {
  it('counts whole cards by nvidia.com/gpu', () => {
    expect(offersOf(node('a', gfd('NVIDIA-H100-80GB-HBM3', 81559), { 'nvidia.com/gpu': '8' }))).toEqual([
      { class: 'h100-80g', resource: 'nvidia.com/gpu', count: 8 },
    ]);
  });

  it('counts MIG devices of the mixed strategy by profile', () => {
    const n = node('b', gfd('NVIDIA-A100-SXM4-80GB', 81920), {
      'nvidia.com/gpu': '0',
      'nvidia.com/mig-3g.40gb': '2',
      'nvidia.com/mig-1g.10gb': '4',
    });
    expect(offersOf(n)).toEqual([
      { class: 'a100-80g-mig-1g.10gb', resource: 'nvidia.com/mig-1g.10gb', count: 4, mig: '1g.10gb' },
      { class: 'a100-80g-mig-3g.40gb', resource: 'nvidia.com/mig-3g.40gb', count: 2, mig: '3g.40gb' },
    ]);
  });

  it('offers nothing on a node without GPUs', () => {
    expect(offersOf(node('c', {}, {}))).toEqual([]);
  });
});

describe('resourceOf', () => {
  it.each([
    ['h100-80g', 4, { resource: 'nvidia.com/gpu', count: 4 }],
    ['a100-80g-mig-3g.40gb', 1, { resource: 'nvidia.com/mig-3g.40gb', count: 1 }],
    ['h100-80g-mig-1c.3g.40gb', 1, { resource: 'nvidia.com/mig-1c.3g.40gb', count: 1 }],
  ])('%s × %i requests %o', (cls, n, want) => {
    expect(resourceOf(cls, n)).toEqual(want);
  });
});

describe('kubeNodeView', () => {
  const pod = (nodeName: string, requests: Record<string, string>, phase = 'Running'): KPod => ({
    metadata: { name: 'p' },
    spec: { nodeName, containers: [{ name: 'engine', resources: { requests } }] },
    status: { phase },
  });

  it('shows devices by class, and what llmgw pods use', () => {
    const n = node('gpu-1', gfd('NVIDIA-H100-80GB-HBM3', 81559), { 'nvidia.com/gpu': '4' });
    const v = kubeNodeView(n, [
      pod('gpu-1', { 'nvidia.com/gpu': '2' }),
      pod('gpu-1', { 'nvidia.com/gpu': '1' }, 'Succeeded'),
      pod('gpu-2', { 'nvidia.com/gpu': '1' }),
    ]);
    expect(v).toMatchObject({
      name: 'gpu-1',
      state: 'ready',
      address: '10.0.0.5',
      agent_version: 'kubernetes v1.31.2',
      devices_by_class: { 'h100-80g': 4 },
      devices_in_use_by_class: { 'h100-80g': 2 },
      host: { cpus: { count: 64 }, memory: { total_mib: 257543 } },
    });
    expect(v.devices.map((d) => d.label)).toEqual(['0', '1', '2', '3']);
  });

  it('says why a node is not ready: cordoned, or the kubelet’s words', () => {
    const cordoned = node('x', {}, {});
    cordoned.spec = { unschedulable: true };
    expect(kubeNodeView(cordoned, []).reason).toBe(
      'cordoned: no new pods are scheduled here (kubectl uncordon x)',
    );
    const down = node('y', {}, {});
    if (down.status !== undefined)
      down.status.conditions = [
        { type: 'Ready', status: 'Unknown', message: 'Kubelet stopped posting node status.' },
      ];
    expect(kubeNodeView(down, [])).toMatchObject({
      state: 'not_ready',
      reason: 'the kubelet says: Kubelet stopped posting node status.',
    });
  });
});

describe('parseQuantity', () => {
  it.each([
    ['2', 2],
    ['3500m', 3.5],
    ['16Gi', 16 * 2 ** 30],
    ['131072Ki', 131072 * 1024],
    ['1e3', 1000],
    ['1G', 1e9],
  ])('%s is %d', (text, want) => {
    expect(parseQuantity(text)).toBe(want);
  });
  it('is NaN for what it cannot read', () => {
    expect(parseQuantity('lots')).toBeNaN();
    expect(parseQuantity(undefined)).toBeNaN();
  });
});
