import type * as levenshtein from 'fastest-levenshtein';
import { distance } from 'fastest-levenshtein';
import { describe, expect, it, vi } from 'vitest';

import { didYouMean } from './did-you-mean.js';

vi.mock('fastest-levenshtein', async (actual) => {
  const real = await actual<typeof levenshtein>();
  return { ...real, distance: vi.fn(real.distance) };
});

describe('did-you-mean over a large catalog', () => {
  const names = Array.from({ length: 1831 }, (_, i) => `model-${i}`);

  it('computes no edit distance for a name no candidate is near in length', () => {
    vi.mocked(distance).mockClear();
    expect(didYouMean('m'.repeat(1024 * 1024), names)).toBeUndefined();
    expect(
      didYouMean('a-name-of-sixty-three-characters-that-is-nothing-like-any-model', names),
    ).toBeUndefined();
    expect(vi.mocked(distance)).not.toHaveBeenCalled();
  });

  it('still finds the typo among them', () => {
    expect(didYouMean('modle-1830', names)).toBe('model-1830');
  });
});
