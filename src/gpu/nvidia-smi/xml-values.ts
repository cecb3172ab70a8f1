/**
 * Reading values out of nvidia-smi's XML, as fast-xml-parser gives it: nested plain
 * objects and strings. Every value is text, often with a unit (`81559 MiB`, `41 C`,
 * `433.78 W`, `30 %`), or `N/A` (also `Not Supported`, `Unknown Error`) when the card does
 * not say; those become undefined rather than zero.
 */

function isRecord(node: unknown): node is Record<string, unknown> {
  return typeof node === 'object' && node !== null && !Array.isArray(node);
}

/** The child at a path of element names, or undefined where one is missing. */
export function child(node: unknown, ...path: string[]): unknown {
  let at = node;
  for (const name of path) {
    if (!isRecord(at)) return undefined;
    at = at[name];
  }
  return at;
}

/** Elements that may repeat: a list whether the parser gave one, a single object or text. */
export function children(node: unknown, name: string): Record<string, unknown>[] {
  const value = child(node, name);
  const items = Array.isArray(value) ? (value as unknown[]) : [value];
  return items.filter(isRecord);
}

/** Text content, or undefined when empty or one of the driver's "no value" words. */
export function text(node: unknown): string | undefined {
  if (typeof node !== 'string' && typeof node !== 'number') return undefined;
  const value = String(node).trim();
  if (value === '' || /^\[?(?:N\/A|Not Supported|Unknown Error|Insufficient Permissions)\]?$/i.test(value)) {
    return undefined;
  }
  return value;
}

/** The leading number of a value with a unit: `433.78 W` is 433.78. */
export function numeric(node: unknown): number | undefined {
  const value = text(node);
  if (value === undefined) return undefined;
  const m = /^-?\d+(?:\.\d+)?/.exec(value);
  return m === null ? undefined : Number(m[0]);
}

/** `Yes` / `No`. */
export function yesNo(node: unknown): boolean | undefined {
  const value = text(node)?.toLowerCase();
  return value === 'yes' ? true : value === 'no' ? false : undefined;
}

/** `Enabled` / `Disabled`. */
export function enabled(node: unknown): boolean | undefined {
  const value = text(node)?.toLowerCase();
  return value === 'enabled' ? true : value === 'disabled' ? false : undefined;
}

/** The sum of those that are numbers; undefined when none is. */
export function sumOf(values: readonly (number | undefined)[]): number | undefined {
  const known = values.filter((v): v is number => v !== undefined);
  return known.length === 0 ? undefined : known.reduce((a, b) => a + b, 0);
}

/** The first that is a number. */
export function firstOf(values: readonly (number | undefined)[]): number | undefined {
  return values.find((v) => v !== undefined);
}
