import type { Card, NodeInventory } from '../../src/gpu/types.js';

/** A made-up machine for agent tests that do not need discovery itself. */
export function inventoryWith(cards: Card[], hostname = 'test-node'): NodeInventory {
  return {
    host: {
      hostname,
      os: 'linux test',
      arch: 'x64',
      cpus: { count: 16, model: 'Test CPU' },
      memory: { total_mib: 65536, free_mib: 60000 },
      disk: { path: '/var/lib/llmgw', total_mib: 1_000_000, free_mib: 500_000 },
    },
    gpu: {
      method: cards.length === 0 ? 'none' : 'nvidia-smi',
      reasons: cards.length === 0 ? [] : ['nvml: libnvidia-ml.so.1 not found'],
      driver_version: '590.48.01',
      cuda_version: '13.1',
      cards,
    },
    agent_version: '0.0.0-test',
  };
}

export function a100(index: number, overrides: Partial<Card> = {}): Card {
  return {
    index,
    uuid: `GPU-00000000-0000-0000-0000-00000000000${index}`,
    name: 'NVIDIA A100-SXM4-80GB',
    class: 'a100-80g',
    pci_bus_id: `00000000:0${index}:00.0`,
    memory_total_mib: 81920,
    memory_used_mib: 0,
    temperature_c: 35,
    power_w: 60,
    power_limit_w: 400,
    utilization_pct: 0,
    wear: {},
    mig: { current: false, pending: false },
    processes: [],
    instances: [],
    ...overrides,
  };
}

export function migA100(index: number, profiles: string[]): Card {
  return a100(index, {
    mig: { current: true, pending: true },
    instances: profiles.map((profile, i) => ({
      index: i,
      uuid: `MIG-1111111${index}-2222-3333-4444-55555555555${i}`,
      profile,
      gpu_instance_id: i + 1,
      compute_instance_id: 0,
      memory_total_mib: profile.startsWith('3g') ? 40192 : 9856,
      memory_used_mib: 13,
      processes: [],
    })),
    utilization_pct: undefined,
  });
}
