/** resource.Quantity as the API server parses it: "1", "500m", "16Gi", "1e3", "1.5k". */

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const RE = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/;

/** The quantity's value as a number, or undefined when it does not parse. */
export function parseQuantity(q: unknown): number | undefined {
  if (typeof q === 'number') return q;
  if (typeof q !== 'string') return undefined;
  const m = RE.exec(q);
  if (!m) return undefined;
  const [, sign, digits = '0', suffix, exp] = m;
  const v = Number(digits) * (exp !== undefined ? 10 ** Number(exp) : SUFFIX[suffix ?? '']!);
  return sign === '-' ? -v : v;
}

/** The message the real server gives a quantity that does not parse. */
export const QUANTITY_MESSAGE =
  "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
