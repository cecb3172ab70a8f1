import { migClass, parseGpuClass } from '../catalog/gpu-class.js';
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

/**
 * Observed instance memory by a MIG profile's memory size (`3g.40gb` → `40gb`). Memory is cut
 * in slices apart from compute, so the profiles of one size on a card have the same memory
 * (3g.40gb and 4g.40gb: 4 of 8 slices). 7g.141gb: 140.00 GiB in a third-party `-lgip` fixture.
 */
const MIG_MIB: Readonly<Record<string, number>> = {
  '5gb': 4864,
  '10gb': 9984,
  '20gb': 20_096,
  '40gb': 40_448,
  '18gb': 16_384,
  '35gb': 33_280,
  '71gb': 71_424,
  '141gb': 143_360,
};

/** The MIG profiles of each card (mig-parted's default config, the MIG guide): gpus-and-engines.md §C. */
const MIG_PROFILES: Readonly<Record<string, readonly string[]>> = {
  'a100-40g': ['1g.5gb', '1g.5gb+me', '1g.10gb', '2g.10gb', '3g.20gb', '4g.20gb', '7g.40gb'],
  'a100-80g': ['1g.10gb', '1g.10gb+me', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb'],
  'h100-80g': ['1g.10gb', '1g.10gb+me', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb'],
  'h200-141g': ['1g.18gb', '1g.18gb+me', '1g.35gb', '2g.35gb', '3g.71gb', '4g.71gb', '7g.141gb'],
};

/** GDDR cards report about 0.94 of their marketed GiB (L4: 23034 of 24576 MiB); MIG instances less. */
const CARD_SHARE = 0.935;
const MIG_SHARE = 0.88;

export function classMemoryBytes(name: string): number | undefined {
  const cls = parseGpuClass(name);
  if (cls === undefined) return undefined;
  if (cls.migProfile !== undefined) {
    const gb = /\.(\d+)gb(?:\+me)?$/.exec(cls.migProfile)?.[1];
    if (gb === undefined) return undefined;
    const seen = MIG_MIB[`${gb}gb`];
    return (seen ?? Math.floor(Number(gb) * 1024 * MIG_SHARE)) * MIB;
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

/** The MIG classes of a card class, as parseGpuClass reads them (`a100-80g-mig-3g.40gb`); none where not known. */
export function migClassesOf(cardClass: string): string[] {
  return (MIG_PROFILES[cardClass] ?? []).map((p) => migClass(cardClass, p));
}
