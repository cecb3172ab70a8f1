import { describe, expect, it } from 'vitest';

import { deviceLabel, devicesOf, migDeviceId, parseDeviceLabel } from './devices.js';
import type { Card, MigInstance } from './types.js';

function card(index: number, overrides: Partial<Card> = {}): Card {
  return {
    index,
    uuid: `GPU-${index}`,
    name: 'NVIDIA A100-SXM4-80GB',
    class: 'a100-80g',
    pci_bus_id: `00000000:0${index}:00.0`,
    memory_total_mib: 81920,
    memory_used_mib: 100,
    temperature_c: 40 + index,
    power_w: 100 + index,
    power_limit_w: 400,
    utilization_pct: 50,
    wear: { ecc_uncorrectable: 1, remapped_rows_pending: false },
    mig: { current: false, pending: false },
    processes: [{ pid: 10 + index, name: 'python3', memory_mib: 90 }],
    instances: [],
    ...overrides,
  };
}

function instance(index: number, profile: string, gi: number): MigInstance {
  return {
    index,
    uuid: `MIG-${index}`,
    profile,
    gpu_instance_id: gi,
    compute_instance_id: 0,
    memory_total_mib: 40448,
    memory_used_mib: 7510,
    processes: index === 0 ? [{ pid: 21198, name: './gpu_burn', memory_mib: 7484 }] : [],
  };
}

const migCard = (index: number, instances: MigInstance[]): Card =>
  card(index, {
    mig: { current: true, pending: true },
    instances,
    utilization_pct: undefined,
    processes: [],
  });

describe('devicesOf', () => {
  it('gives a whole card its index as id and label', () => {
    const { devices, excluded } = devicesOf([card(0), card(1, { mig: undefined })]);
    expect(excluded).toEqual([]);
    expect(devices.map((d) => [d.id, d.label, d.class, d.uuid])).toEqual([
      [0, '0', 'a100-80g', 'GPU-0'],
      [1, '1', 'a100-80g', 'GPU-1'],
    ]);
    expect(devices[0]).toMatchObject({
      card: 0,
      memory_total_mib: 81920,
      utilization_pct: 50,
      temperature_c: 40,
      power_w: 100,
      processes: [{ pid: 10 }],
    });
    expect(devices[0]?.mig).toBeUndefined();
  });

  it('reports a card in MIG mode as its instances, numbered 1000 + 100 × card + instance', () => {
    const cards = [
      card(0),
      migCard(2, [instance(0, '3g.40gb', 2), instance(1, '2g.20gb', 3), instance(2, '1g.10gb', 9)]),
    ];
    const { devices } = devicesOf(cards);
    expect(devices.map((d) => [d.id, d.label, d.class, d.uuid])).toEqual([
      [0, '0', 'a100-80g', 'GPU-0'],
      [1200, '2/mig0', 'a100-80g-mig-3g.40gb', 'MIG-0'],
      [1201, '2/mig1', 'a100-80g-mig-2g.20gb', 'MIG-1'],
      [1202, '2/mig2', 'a100-80g-mig-1g.10gb', 'MIG-2'],
    ]);
  });

  it("gives instances their own memory and processes, the card's heat, power and wear, and no utilization", () => {
    const { devices } = devicesOf([migCard(1, [instance(0, '3g.40gb', 2), instance(1, '3g.40gb', 1)])]);
    const [first, second] = devices;
    expect(first).toMatchObject({
      card: 1,
      memory_total_mib: 40448,
      memory_used_mib: 7510,
      temperature_c: 41,
      power_w: 101,
      wear: { ecc_uncorrectable: 1, remapped_rows_pending: false },
      processes: [{ pid: 21198, name: './gpu_burn', memory_mib: 7484 }],
      mig: { profile: '3g.40gb', instance: 0, gpu_instance_id: 2, compute_instance_id: 0 },
    });
    expect(second?.processes).toEqual([]);
    for (const d of devices) expect('utilization_pct' in d).toBe(false);
  });

  it('leaves utilization out even when a MIG card carries one', () => {
    const withUtil = { ...migCard(0, [instance(0, '7g.80gb', 0)]), utilization_pct: 0 };
    expect('utilization_pct' in (devicesOf([withUtil]).devices[0] ?? {})).toBe(false);
  });

  it('excludes a card in MIG mode with nothing carved, saying what to do', () => {
    const { devices, excluded } = devicesOf([migCard(3, []), card(4)]);
    expect(devices.map((d) => d.id)).toEqual([4]);
    expect(excluded).toEqual([
      {
        card: 3,
        uuid: 'GPU-3',
        class: 'a100-80g',
        reason:
          'MIG mode with no instances carved: create some (nvidia-smi mig -i 3 -cgi 9,9 -C) or turn MIG off (nvidia-smi -i 3 -mig 0)',
      },
    ]);
  });

  it.each([
    [{ current: false, pending: true }, 'enabled'],
    [{ current: true, pending: false }, 'disabled'],
  ])('excludes a card whose MIG mode %o waits for a reset', (mig, to) => {
    const c = card(5, { mig, instances: mig.current ? [instance(0, '7g.80gb', 0)] : [] });
    const { devices, excluded } = devicesOf([c]);
    expect(devices).toEqual([]);
    expect(excluded[0]?.reason).toBe(
      `MIG mode change to ${to} waits for a GPU reset: reset it (nvidia-smi -r -i 5) or reboot`,
    );
  });

  it('has nothing for a node without cards', () => {
    expect(devicesOf([])).toEqual({ devices: [], excluded: [] });
  });
});

describe('device labels', () => {
  it.each([
    [0, '0'],
    [7, '7'],
    [1000, '0/mig0'],
    [1001, '0/mig1'],
    [1102, '1/mig2'],
    [1706, '7/mig6'],
    [2300, '13/mig0'],
  ])('%i is %s and back', (id, label) => {
    expect(deviceLabel(id)).toBe(label);
    expect(parseDeviceLabel(label)).toBe(id);
  });

  it('numbers instances as placement does', () => {
    expect(migDeviceId(1, 2)).toBe(1102);
  });

  it.each(['', 'gpu0', '0/mig', '0/MIG1', '-1', '1/mig100', '1000', '0/mig1/2'])('refuses %j', (label) => {
    expect(parseDeviceLabel(label)).toBeUndefined();
  });
});
