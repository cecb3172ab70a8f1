import { isDeepStrictEqual } from 'node:util';

import { formatPath } from './errors.js';

export interface Change {
  path: string;
  before?: unknown;
  after?: unknown;
}

/** What differs between two JSON values, path by path: for audit entries a person reads. */
export function diffJson(before: unknown, after: unknown, path: (string | number)[] = []): Change[] {
  if (isDeepStrictEqual(before, after)) return [];
  const bothObjects =
    typeof before === 'object' &&
    before !== null &&
    typeof after === 'object' &&
    after !== null &&
    !Array.isArray(before) &&
    !Array.isArray(after);
  if (bothObjects) {
    const b = before as Record<string, unknown>;
    const a = after as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(b), ...Object.keys(a)])];
    return keys.flatMap((k) => diffJson(b[k], a[k], [...path, k]));
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    return before.flatMap((v, i) => diffJson(v, after[i], [...path, i]));
  }
  const change: Change = { path: formatPath(path) };
  if (before !== undefined) change.before = before;
  if (after !== undefined) change.after = after;
  return [change];
}
