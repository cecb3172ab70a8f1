import { describe, expect, it } from 'vitest';

import { sumCounts } from './counts.js';

const c = (requests: number, ttft: number[]) => ({
  requests,
  errors: 1,
  prompt_tokens: 10,
  completion_tokens: 5,
  ttft: { bounds: [0.1, 1], counts: ttft },
});

describe('sumCounts', () => {
  it('adds each model’s counters and TTFT buckets over gateways', () => {
    const got = sumCounts([
      new Map([['a', c(2, [1, 0, 1])]]),
      new Map([
        ['a', c(3, [0, 2, 0])],
        ['b', c(1, [1, 0, 0])],
      ]),
      new Map(),
    ]);
    expect(Object.fromEntries(got)).toEqual({
      a: {
        requests: 5,
        errors: 2,
        prompt_tokens: 20,
        completion_tokens: 10,
        ttft: { bounds: [0.1, 1], counts: [1, 2, 1] },
      },
      b: c(1, [1, 0, 0]),
    });
  });

  it('is empty for no gateways', () => {
    expect(sumCounts([]).size).toBe(0);
  });
});
