/**
 * One byte range of a `Range` header (RFC 9110, 14.1.2): `bytes=A-B`, `bytes=A-` or `bytes=-N`.
 * The mirror answers one range; agents ask for no more (a resumed file, or one part of it).
 */
export interface ByteRange {
  start: number;
  /** Inclusive. */
  end: number;
}

/**
 * The range asked for in a file of `size` bytes: undefined without a header (the whole file),
 * 'unsatisfiable' for a range outside the file or a header of another form (answered 416).
 */
export function parseRange(
  header: string | undefined,
  size: number,
): ByteRange | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return 'unsatisfiable';
  const [, first = '', last = ''] = m;
  if (first === '' && last === '') return 'unsatisfiable';
  if (first === '') {
    // The last N bytes; of a file shorter than N, all of it.
    const n = Number(last);
    if (n === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (start >= size || (last !== '' && Number(last) < start)) return 'unsatisfiable';
  return { start, end };
}
