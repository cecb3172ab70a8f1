import { describe, expect, it } from 'vitest';

import { unwritten } from './block-writer.js';

describe('unwritten', () => {
  const b = (t: string) => Buffer.from(t);
  const text = (xs: Uint8Array[]) => xs.map((x) => Buffer.from(x).toString());
  it.each([
    [0, ['abc', 'de', 'f']],
    [1, ['bc', 'de', 'f']],
    [3, ['de', 'f']],
    [4, ['e', 'f']],
    [5, ['f']],
  ])('after %i bytes written, leaves %j', (done, left) => {
    expect(text(unwritten([b('abc'), b('de'), b('f')], done))).toEqual(left);
  });
});
