import { describe, expect, it } from 'vitest';

import { PrefixIndex } from './prefix-index.js';

describe('PrefixIndex', () => {
  it.each([
    ['nothing sent yet', [], [1, 2, 3], 0],
    ['the same prompt', [[1, 2, 3]], [1, 2, 3], 3],
    ['a longer prompt with the same start', [[1, 2]], [1, 2, 3, 4], 2],
    ['a shorter one', [[1, 2, 3, 4]], [1, 2], 2],
    ['a different first block', [[1, 2, 3]], [9, 2, 3], 0],
    // Chained hashes: block 4 held without block 3 (evicted) cannot be used.
    ['a prompt whose third block is missing', [[1, 2], [4]], [1, 2, 3, 4], 2],
  ])('matches %s', (_, sent, prompt, matched) => {
    const index = new PrefixIndex(100);
    for (const s of sent) index.add(s);
    expect(index.matched(prompt)).toBe(matched);
  });

  it('holds at most its bound, dropping the least recently used blocks first', () => {
    const index = new PrefixIndex(4);
    index.add([1, 2]);
    index.add([3, 4]);
    index.add([1, 2]); // used again: 3 and 4 are now the oldest
    index.add([5, 6]);
    expect(index.size).toBe(4);
    expect(index.matched([1, 2])).toBe(2);
    expect(index.matched([5, 6])).toBe(2);
    expect(index.matched([3])).toBe(0);
    for (let i = 0; i < 1000; i++) index.add([i + 100]);
    expect(index.size).toBe(4);
  });
});
