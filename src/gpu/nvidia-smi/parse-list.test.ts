import { describe, expect, it } from 'vitest';

import { smiFixtureFile } from '../../../test/support/fake-gpu.js';
import { parseSmiList } from './parse-list.js';

describe('parseSmiList', () => {
  it('reads a card without MIG', () => {
    expect(
      parseSmiList(
        'GPU 0: NVIDIA GeForce RTX 4070 Laptop GPU (UUID: GPU-1b724e78-eef5-4163-d43c-e4da15d41176)\n',
      ),
    ).toEqual([
      {
        index: 0,
        name: 'NVIDIA GeForce RTX 4070 Laptop GPU',
        uuid: 'GPU-1b724e78-eef5-4163-d43c-e4da15d41176',
        instances: [],
      },
    ]);
  });

  it('reads padded MIG lines of current drivers', () => {
    const [gpu] = parseSmiList(smiFixtureFile('h100-mig-590', 'list.txt'));
    expect(gpu).toMatchObject({
      index: 0,
      name: 'NVIDIA H100 80GB HBM3',
      uuid: 'GPU-950792bf-a01c-3f1a-e122-3473e67f54b2',
    });
    expect(gpu?.instances).toEqual([
      { index: 0, profile: '3g.40gb', uuid: 'MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c' },
      { index: 1, profile: '2g.20gb', uuid: 'MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4' },
      { index: 2, profile: '1g.10gb', uuid: 'MIG-7c1f0b9e-4d2a-5b7e-8f31-0a6c2e9d4b15' },
    ]);
  });

  it('reads compute-instance profiles, whose names fill the padding', () => {
    const gpus = parseSmiList(smiFixtureFile('h200-compute-instances', 'list.txt'));
    expect(gpus.map((g) => g.instances.map((i) => i.profile))).toEqual([[], ['1c.3g.71gb', '2c.3g.71gb']]);
  });

  it('reads a profile name long enough to fill its column', () => {
    const text = 'GPU 0: NVIDIA B200 (UUID: GPU-1)\n  MIG 1c.7g.180gb+meDevice  0: (UUID: MIG-2)\n';
    expect(parseSmiList(text)[0]?.instances).toEqual([
      { index: 0, profile: '1c.7g.180gb+me', uuid: 'MIG-2' },
    ]);
  });

  it('reads old drivers: no NVIDIA prefix, single spaces, MIG-GPU-<uuid>/<gi>/<ci>', () => {
    const [a100, t4] = parseSmiList(smiFixtureFile('old-460', 'list.txt'));
    expect(a100?.name).toBe('A100-PCIE-40GB');
    expect(a100?.instances).toEqual([
      {
        index: 0,
        profile: '3g.20gb',
        uuid: 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0',
        gpuInstanceId: 1,
        computeInstanceId: 0,
      },
      {
        index: 1,
        profile: '2g.10gb',
        uuid: 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/5/0',
        gpuInstanceId: 5,
        computeInstanceId: 0,
      },
    ]);
    expect(t4).toMatchObject({ index: 1, name: 'Tesla T4', instances: [] });
  });

  it('reads eight cards in order', () => {
    const gpus = parseSmiList(smiFixtureFile('a100x8-550', 'list.txt'));
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(new Set(gpus.map((g) => g.name))).toEqual(new Set(['NVIDIA A100-SXM4-80GB']));
  });

  it('skips lines that are not about devices, and MIG lines before any card', () => {
    const text = [
      '  MIG 1g.10gb     Device  0: (UUID: MIG-orphan)',
      'Warning: persistence mode is disabled on device 00000000:01:00.0.',
      'GPU 0: NVIDIA L4 (UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)',
      '',
    ].join('\r\n');
    expect(parseSmiList(text)).toEqual([
      { index: 0, name: 'NVIDIA L4', uuid: 'GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee', instances: [] },
    ]);
  });

  it('reads nothing from nothing', () => {
    expect(parseSmiList('')).toEqual([]);
    expect(parseSmiList('No devices were found\n')).toEqual([]);
  });
});
