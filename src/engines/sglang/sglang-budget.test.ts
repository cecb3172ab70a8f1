import { describe, expect, it } from 'vitest';

import { defaultMemFractionStatic } from './sglang-budget.js';

describe("SGLang's budget", () => {
  it("derives SGLang's default fraction by card memory and tp", () => {
    // L4: a 2048-token chunk, graphs of 24: reserved 512 + 3072 + 48 + 128 MiB.
    expect(defaultMemFractionStatic({ memoryMib: 23034, tp: 1, pp: 1 })).toBe(0.837);
    // Over 60 GiB at least 10 GiB reserved; speculative decoding 2 GiB more.
    expect(defaultMemFractionStatic({ memoryMib: 81920, tp: 1, pp: 1 })).toBe(0.836);
    expect(defaultMemFractionStatic({ memoryMib: 81920, tp: 1, pp: 1, speculative: 'EAGLE' })).toBe(0.811);
  });
});
