import { describe, expect, it } from 'vitest';

import { smiFixtureFile, type SmiFixture } from '../../../test/support/fake-gpu.js';
import { mixedMigH100Instances } from '../../../test/support/gpu-expectations.js';
import { joinSmi } from './join-smi.js';
import { parseSmiList } from './parse-list.js';
import { parseSmiQuery } from './parse-query.js';

function join(
  fixture: SmiFixture,
  list: string = smiFixtureFile(fixture, 'list.txt'),
): ReturnType<typeof joinSmi> {
  return joinSmi(parseSmiList(list), parseSmiQuery(smiFixtureFile(fixture, 'query.xml')));
}

describe('joinSmi', () => {
  it('takes MIG UUIDs and profiles from -L, memory and ids from the XML, processes by GI/CI', () => {
    const { cards, unmatched } = join('h100-mig-590');
    expect(unmatched).toEqual([]);
    const [h100] = cards;
    expect(h100?.class).toBe('h100-80g');
    expect(h100?.processes).toEqual([]);
    expect(h100?.instances).toEqual(mixedMigH100Instances);
  });

  it('matches old-style MIG UUIDs by the GI/CI ids they carry, not by position', () => {
    // The same devices listed the other way round: ids still pair them right.
    const list = smiFixtureFile('old-460', 'list.txt')
      .split('\n')
      .map((line) =>
        line
          .replace('Device 0:', 'Device X:')
          .replace('Device 1:', 'Device 0:')
          .replace('Device X:', 'Device 1:'),
      )
      .join('\n');
    const { cards, unmatched } = join('old-460', list);
    expect(unmatched).toEqual([]);
    expect(
      cards[0]?.instances.map((i) => [i.gpu_instance_id, i.profile, i.uuid, i.processes.length]),
    ).toEqual([
      [1, '3g.20gb', 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0', 1],
      [5, '2g.10gb', 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/5/0', 0],
    ]);
    expect(cards.map((c) => c.class)).toEqual(['a100-40g', 't4-16g']);
  });

  it('pairs cards by UUID, whatever order -L printed them in', () => {
    const list = smiFixtureFile('mig-none-carved', 'list.txt').trim().split('\n').reverse().join('\n');
    const { cards } = join('mig-none-carved', list);
    expect(cards.map((c) => [c.index, c.uuid, c.mig?.current])).toEqual([
      [0, 'GPU-0e7c5a91-2b3d-4f6e-9a8b-7c6d5e4f3a21', true],
      [1, 'GPU-1f8d6ba2-3c4e-5a7f-0b9c-8d7e6f5a4b32', false],
    ]);
  });

  it('leaves out, and names, MIG devices only one of the two outputs shows', () => {
    const list = smiFixtureFile('h100-mig-590', 'list.txt')
      .split('\n')
      .filter((line) => !line.includes('Device  2'))
      .concat('  MIG 1g.10gb     Device  5: (UUID: MIG-new)')
      .join('\n');
    const { cards, unmatched } = join('h100-mig-590', list);
    expect(cards[0]?.instances.map((i) => i.index)).toEqual([0, 1]);
    expect(unmatched).toEqual([
      'GPU 0 MIG device 2 (GI 9, CI 0) is not in nvidia-smi -L',
      'GPU 0 MIG device 5 (MIG-new) is not in nvidia-smi -q -x',
    ]);
  });

  it('keeps the XML name, the card utilization only outside MIG mode, and the driver versions', () => {
    const joined = join('a100x8-550');
    expect(joined.driver_version).toBe('550.54.15');
    expect(joined.cuda_version).toBe('12.4');
    expect(joined.cards.map((c) => c.utilization_pct)).toEqual([90, 91, 92, 93, 0, 0, 0, 0]);
    expect(joined.cards[0]).toMatchObject({
      index: 0,
      name: 'NVIDIA A100-SXM4-80GB',
      class: 'a100-80g',
      pci_bus_id: '00000000:07:00.0',
      power_w: 60,
      power_limit_w: 400,
      temperature_c: 30,
      processes: [
        { pid: 31000, name: '/usr/bin/python3', memory_mib: 72530 },
        { pid: 31100, name: 'llama-server', memory_mib: 1024 },
      ],
    });
  });

  it('gives compute instances of one GPU instance their own devices and processes', () => {
    const [, split] = join('h200-compute-instances').cards;
    expect(split?.class).toBe('h200-141g');
    expect(
      split?.instances.map((i) => [
        i.index,
        i.profile,
        i.gpu_instance_id,
        i.compute_instance_id,
        i.processes,
      ]),
    ).toEqual([
      [0, '1c.3g.71gb', 1, 0, []],
      [1, '2c.3g.71gb', 1, 1, [{ pid: 42000, name: 'llama-server', memory_mib: 30200 }]],
    ]);
  });
});
