/**
 * Kubernetes resource quantities (`131072Ki`, `16Gi`, `3500m`, `2`) as numbers. Only the
 * suffixes the API writes for nodes' allocatable resources are read; anything else is NaN.
 */
const factors: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

export function parseQuantity(text: string | undefined): number {
  if (text === undefined) return NaN;
  const m = /^([0-9]+(?:\.[0-9]+)?)(?:e([0-9]+))?([a-zA-Z]*)$/.exec(text.trim());
  if (m === null) return NaN;
  const factor = factors[m[3] ?? ''];
  if (factor === undefined) return NaN;
  return Number(m[1]) * 10 ** Number(m[2] ?? 0) * factor;
}

/** A quantity in MiB, rounded down; 0 when absent or unreadable. */
export function mibOf(text: string | undefined): number {
  const n = parseQuantity(text);
  return Number.isFinite(n) ? Math.floor(n / 2 ** 20) : 0;
}

/** A count (GPUs, MIG devices, CPUs), rounded down; 0 when absent or unreadable. */
export function countOf(text: string | undefined): number {
  const n = parseQuantity(text);
  return Number.isFinite(n) ? Math.floor(n + 1e-9) : 0;
}
