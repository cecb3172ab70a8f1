import { parseGpuClass } from '../catalog/gpu-class.js';
import { MIB } from './units.js';

/**
 * A device class's memory where no node has reported one (`llmgw ctl plan --class` on an empty
 * cluster): what nvidia-smi reports as memory.total for the cards and MIG instances seen in
 * captures (shared/reference/gpus-and-engines.md §A, §C), else a conservative share of the
 * marketed size. A node's reported total is always the better figure.
 */
const CARD_MIB: Readonly<Record<string, number>> = {
  'h100-80g': 81_559,
  'h200-141g': 143_771,
  'l4-24g': 23_034,
  'a100-80g': 81_920,
  'a100-40g': 40_960,
};

/** Observed instance memory by MIG profile (the compute-instance prefix and +me aside). */
const MIG_MIB: Readonly<Record<string, number>> = {
  '1g.5gb': 4864,
  '2g.10gb': 9984,
  '3g.20gb': 20_096,
  '7g.40gb': 40_448,
  '1g.10gb': 9984,
  '2g.20gb': 20_096,
  '3g.40gb': 40_448,
  '1g.18gb': 16_384,
  '2g.35gb': 33_280,
  '3g.71gb': 71_424,
};

/** GDDR cards report about 0.94 of their marketed GiB (L4: 23034 of 24576 MiB); MIG instances less. */
const CARD_SHARE = 0.935;
const MIG_SHARE = 0.88;

export function classMemoryBytes(name: string): number | undefined {
  const cls = parseGpuClass(name);
  if (cls === undefined) return undefined;
  if (cls.migProfile !== undefined) {
    const profile = cls.migProfile.replace(/^\d+c\./, '').replace(/\+me$/, '');
    const seen = MIG_MIB[profile];
    if (seen !== undefined) return seen * MIB;
    const gb = Number(/\.(\d+)gb$/.exec(profile)?.[1] ?? NaN);
    return Number.isFinite(gb) ? Math.floor(gb * 1024 * MIG_SHARE) * MIB : undefined;
  }
  const seen = CARD_MIB[cls.card];
  if (seen !== undefined) return seen * MIB;
  const gb = Number(/-(\d+)g$/.exec(cls.card)?.[1] ?? NaN);
  return Number.isFinite(gb) ? Math.floor(gb * 1024 * CARD_SHARE) * MIB : undefined;
}

/** The card classes whose memory is known without a node reporting it. */
export function knownCardClasses(): string[] {
  return Object.keys(CARD_MIB);
}
