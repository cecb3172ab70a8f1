/**
 * MIG profile names from what NVML measures, for a MIG device whose name does not carry
 * its profile. Names are the better source: memory does not say the marketed figure
 * (a 3g.40gb instance has 40448 MiB, a 1g.18gb one 16384 MiB), so the figure is the
 * nearest one NVIDIA sells for that card and slice count (MIG user guide, profile tables).
 */

/** Card memory in GB -> GPU-instance slices -> the GB figures of its profiles. */
const profileGb: Readonly<Record<number, Readonly<Record<number, readonly number[]>>>> = {
  24: { 1: [6], 2: [12], 4: [24] },
  40: { 1: [5, 10], 2: [10], 3: [20], 4: [20], 7: [40] },
  80: { 1: [10, 20], 2: [20], 3: [40], 4: [40], 7: [80] },
  94: { 1: [12, 24], 2: [24], 3: [47], 4: [47], 7: [94] },
  141: { 1: [18, 35], 2: [35], 3: [71], 4: [71], 7: [141] },
  180: { 1: [23, 45], 2: [45], 3: [90], 4: [90], 7: [180] },
};

export interface MigShape {
  /** The card's memory in marketed GB (80 for an A100-80GB). */
  cardGb: number;
  gpuSlices: number;
  computeSlices: number;
  memoryMib: number;
  /** The instance holds the card's media engines (a `+me` profile). */
  media: boolean;
}

/** `{cardGb: 80, gpuSlices: 3, computeSlices: 3, memoryMib: 40448}`: `3g.40gb`. */
export function migProfileOf(shape: MigShape): string {
  const gib = shape.memoryMib / 1024;
  const candidates = profileGb[shape.cardGb]?.[shape.gpuSlices] ?? [Math.ceil(gib)];
  let gb = candidates[0] ?? Math.ceil(gib);
  for (const c of candidates) if (Math.abs(c - gib) < Math.abs(gb - gib)) gb = c;
  const ci =
    shape.computeSlices > 0 && shape.computeSlices < shape.gpuSlices ? `${shape.computeSlices}c.` : '';
  return `${ci}${shape.gpuSlices}g.${gb}gb${shape.media ? '+me' : ''}`;
}
