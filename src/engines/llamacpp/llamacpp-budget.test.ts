import { describe, expect, it } from 'vitest';

import { LLAMACPP_CACHE_TYPES } from './llamacpp-budget.js';

describe("llama.cpp's budget", () => {
  it('reads its cache types in bytes a value, as ggml blocks them', () => {
    expect(LLAMACPP_CACHE_TYPES['q4_0']).toBe(18 / 32);
    expect(LLAMACPP_CACHE_TYPES['f16']).toBe(2);
  });
});
