import { describe, expect, it } from 'vitest';

import { cardClass, cpuClass, marketedSize, migInstanceClass } from './classes.js';
import { migProfileOf } from './mig-profiles.js';

/** The catalog's class pattern (src/catalog/gpu-class.ts), which lint keeps this folder from importing. */
const catalogPattern = /^[a-z0-9]+-\d+g(?:-mig-(?:\d+c\.)?\d+g\.\d+gb(?:\+me)?)?$/;

describe('cardClass', () => {
  it.each([
    ['NVIDIA A100-SXM4-80GB', 81920, 'a100-80g'],
    ['A100-PCIE-80GB', 81920, 'a100-80g'],
    ['NVIDIA A100 80GB PCIe', 81920, 'a100-80g'],
    ['NVIDIA A100-SXM4-40GB', 40960, 'a100-40g'],
    ['A100-PCIE-40GB', 40536, 'a100-40g'],
    ['NVIDIA A30', 24576, 'a30-24g'],
    ['NVIDIA H100 80GB HBM3', 81559, 'h100-80g'],
    ['NVIDIA H100 PCIe', 81559, 'h100-80g'],
    ['NVIDIA H100 NVL', 95830, 'h100-94g'],
    ['NVIDIA H200', 143771, 'h200-141g'],
    ['NVIDIA H200 NVL', 143771, 'h200-141g'],
    ['NVIDIA L4', 23034, 'l4-24g'],
    ['NVIDIA L40S', 46068, 'l40s-48g'],
    ['NVIDIA GeForce RTX 4090', 24564, 'rtx4090-24g'],
    ['NVIDIA GeForce RTX 4070 Laptop GPU', 8188, 'rtx4070laptop-8g'],
    ['Tesla T4', 15109, 't4-16g'],
    ['Tesla V100-SXM2-16GB', 16160, 'v100-16g'],
    ['NVIDIA RTX 6000 Ada Generation', 49140, 'rtx6000ada-48g'],
    ['NVIDIA RTX A6000', 49140, 'rtxa6000-48g'],
    ['NVIDIA A10G', 23028, 'a10g-24g'],
    ['NVIDIA B200', 183359, 'b200-180g'],
    // 480GB counts the Grace CPU's memory; the GPU has 96 GB.
    ['NVIDIA GH200 480GB', 97871, 'gh200-96g'],
  ])('%s with %i MiB is %s', (name, mib, expected) => {
    const got = cardClass(name, mib);
    expect(got).toBe(expected);
    expect(got).toMatch(catalogPattern);
  });

  it('reads the card part of a MIG device name', () => {
    expect(cardClass('NVIDIA A100-SXM4-80GB MIG 3g.40gb', 81920)).toBe('a100-80g');
  });

  it('falls back to the name when the driver gives no memory', () => {
    expect(cardClass('NVIDIA A100-SXM4-40GB', 0)).toBe('a100-40g');
  });

  it('names a card it cannot read something that still parses', () => {
    expect(cardClass('NVIDIA', 16384)).toBe('gpu-16g');
  });
});

describe('marketedSize', () => {
  it.each([
    [81559, 80],
    [143771, 141],
    [23034, 24],
    [46068, 48],
    [95830, 94],
    [40960, 40],
    [24564, 24],
    [0, 0],
    // Far from any sold size: the plain rounding.
    [300_000, 293],
  ])('%i MiB is sold as %i GB', (mib, gb) => {
    expect(marketedSize(mib)).toBe(gb);
  });
});

describe('migInstanceClass', () => {
  it.each([
    ['a100-80g', '3g.40gb', 'a100-80g-mig-3g.40gb'],
    ['h200-141g', '1c.3g.71gb', 'h200-141g-mig-1c.3g.71gb'],
    ['a100-80g', '1g.10gb+me', 'a100-80g-mig-1g.10gb+me'],
  ])('%s and %s: %s', (card, profile, expected) => {
    expect(migInstanceClass(card, profile)).toBe(expected);
    expect(expected).toMatch(catalogPattern);
  });

  it('has a CPU class', () => {
    expect(cpuClass).toBe('cpu');
  });
});

describe('migProfileOf', () => {
  it.each([
    [{ cardGb: 80, gpuSlices: 3, computeSlices: 3, memoryMib: 40448, media: false }, '3g.40gb'],
    [{ cardGb: 80, gpuSlices: 1, computeSlices: 1, memoryMib: 9984, media: true }, '1g.10gb+me'],
    [{ cardGb: 80, gpuSlices: 1, computeSlices: 1, memoryMib: 20096, media: false }, '1g.20gb'],
    [{ cardGb: 141, gpuSlices: 1, computeSlices: 1, memoryMib: 16384, media: false }, '1g.18gb'],
    [{ cardGb: 141, gpuSlices: 3, computeSlices: 1, memoryMib: 71424, media: false }, '1c.3g.71gb'],
    [{ cardGb: 40, gpuSlices: 1, computeSlices: 1, memoryMib: 4864, media: false }, '1g.5gb'],
    // A card the table does not know: the memory rounded up.
    [{ cardGb: 200, gpuSlices: 2, computeSlices: 2, memoryMib: 50000, media: false }, '2g.49gb'],
  ])('%o is %s', (shape, expected) => {
    expect(migProfileOf(shape)).toBe(expected);
  });
});
