/**
 * Device classes: what the catalog's `gpu_class` names. A card's class is its model
 * and memory in lower case (`a100-80g`), the same whatever the driver printed
 * (`NVIDIA A100-SXM4-80GB` and `A100-PCIE-80GB` are one class); a MIG instance's is
 * the card's class, `-mig-` and the profile (`a100-80g-mig-3g.40gb`).
 * The pattern is the catalog's (src/catalog/gpu-class.ts): what discovery names, a
 * profile can ask for.
 */

import { migClass } from '../catalog/gpu-class.js';

/** The class of a node without GPUs. */
export const cpuClass = 'cpu';

/**
 * Memory sizes cards are sold with, in GB. A driver reports a little less than the
 * marketed size (81559 MiB on an 80 GB card, 23034 MiB on a 24 GB L4), so the total is
 * rounded up to the nearest of these.
 */
const marketedGb = [
  1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 128, 141, 144, 180, 192, 256, 288,
];

/** Words that name a brand, a form factor or a memory type, not the model. */
const noise =
  /^(?:nvidia|geforce|tesla|quadro|gpu|generation|edition|nvl|pcie|sxm\d*|hbm\d*e?|gddr\d*x?|\d+gb?)$/;

/** The memory in GB written in a name: `80GB`, `144G`. */
const gbInName = /(?:^|[\s_-])(\d+)\s*gb?(?=$|[\s_-])/;

/** `NVIDIA A100-SXM4-80GB` with 81920 MiB: `a100-80g`. */
export function cardClass(name: string, memoryTotalMib: number): string {
  // A MIG device's name is its card's name and ` MIG <profile>`: the card part decides.
  const lower = name.toLowerCase().replace(/\s+mig\s+\S+\s*$/, '');
  const model = lower
    .split(/[\s_-]+/)
    .filter((word) => word !== '' && !noise.test(word))
    .join('')
    .replace(/[^a-z0-9]/g, '');
  return `${model === '' ? 'gpu' : model}-${memoryGb(lower, memoryTotalMib)}g`;
}

/** The card's memory in marketed GB: the name's figure when it agrees with the total. */
function memoryGb(lowerName: string, memoryTotalMib: number): number {
  const fromTotal = marketedSize(memoryTotalMib);
  const written = gbInName.exec(lowerName)?.[1];
  if (written !== undefined) {
    const gb = Number(written);
    // GH200's name says 480GB, which counts the Grace CPU's memory: trust the name only
    // when the card's own total agrees within a tenth (or is unknown).
    if (fromTotal === 0 || Math.abs(gb - fromTotal) <= fromTotal / 10) return gb;
  }
  return fromTotal;
}

/** 81559 MiB: 80. The smallest marketed size at or just under the total, within 10%. */
export function marketedSize(memoryMib: number): number {
  if (!Number.isFinite(memoryMib) || memoryMib <= 0) return 0;
  const gib = memoryMib / 1024;
  // The 0.5% slack lets an exact figure (40960 MiB) stay 40 rather than rise to 48.
  const size = marketedGb.find((gb) => gb >= gib * 0.995 && gb <= gib * 1.1);
  return size ?? Math.round(gib);
}

/** `a100-80g` and `3g.40gb`: `a100-80g-mig-3g.40gb`, named as the catalog names classes. */
export const migInstanceClass = migClass;
