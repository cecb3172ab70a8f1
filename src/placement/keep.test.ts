import { describe, expect, it } from 'vitest';

import { naturalCompare } from './keep.js';

describe('naturalCompare', () => {
  it.each([
    ['m-9', 'm-10', -1],
    ['m-10', 'm-9', 1],
    ['m-2', 'm-2', 0],
    ['a', 'b', -1],
    ['m-01', 'm-1', -1],
    ['m-1', 'm-1a', -1],
    ['x-99999999999999999999', 'x-100000000000000000000', -1],
    ['r-2-b', 'r-2-a', 1],
  ])('%s against %s', (a, b, sign) => {
    expect(Math.sign(naturalCompare(a, b))).toBe(sign);
  });
});
