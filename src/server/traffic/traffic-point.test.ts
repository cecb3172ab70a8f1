import { describe, expect, it } from 'vitest';

import type { ModelCounts } from '../../protocol/traffic-views.js';

import { pointBetween, quantile, sumCounts } from './traffic-point.js';

const bounds = [0.1, 0.5, 1];
const counts = (o: Partial<Omit<ModelCounts, 'ttft'>> & { ttft?: number[] } = {}): ModelCounts => ({
  requests: 0,
  errors: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  ...o,
  ttft: { bounds, counts: o.ttft ?? [0, 0, 0, 0] },
});
const t = '2026-12-03T10:00:10.000Z';

describe('quantile', () => {
  it.each<[string, number, number[], number | undefined]>([
    ['no observations', 0.5, [0, 0, 0, 0], undefined],
    ['all in the first bucket: from 0 to its bound', 0.5, [4, 0, 0, 0], 0.05],
    ['the p95 of them', 0.95, [4, 0, 0, 0], 0.095],
    ['half below 0.1, half in 0.1..0.5: the median at 0.1', 0.5, [2, 2, 0, 0], 0.1],
    ['p95 of those, in the second bucket', 0.95, [2, 2, 0, 0], 0.1 + 0.4 * 0.9],
    ['above every bound: the highest bound', 0.95, [0, 0, 0, 3], 1],
  ])('%s', (_name, q, c, expected) => {
    const got = quantile(q, bounds, c);
    if (expected === undefined) expect(got).toBeUndefined();
    else expect(got).toBeCloseTo(expected, 9);
  });
});

describe('pointBetween', () => {
  it.each<[string, ModelCounts | undefined, ModelCounts, number, Record<string, unknown>]>([
    [
      'rates over 10 s',
      counts({ requests: 10, errors: 1, prompt_tokens: 100, completion_tokens: 50, ttft: [1, 0, 0, 0] }),
      counts({ requests: 30, errors: 3, prompt_tokens: 600, completion_tokens: 250, ttft: [1, 4, 0, 0] }),
      10,
      {
        requests_per_s: 2,
        errors_per_s: 0.2,
        prompt_tokens_per_s: 50,
        completion_tokens_per_s: 20,
        ttft_p50_ms: 300,
        ttft_p95_ms: 480,
      },
    ],
    [
      'nothing happened: zero rates, no time to first token',
      counts({ requests: 5, ttft: [5, 0, 0, 0] }),
      counts({ requests: 5, ttft: [5, 0, 0, 0] }),
      10,
      {
        requests_per_s: 0,
        errors_per_s: 0,
        prompt_tokens_per_s: 0,
        completion_tokens_per_s: 0,
        ttft_p50_ms: null,
        ttft_p95_ms: null,
      },
    ],
    [
      'a model first seen counts from zero',
      undefined,
      counts({ requests: 4, completion_tokens: 8, ttft: [0, 0, 2, 0] }),
      2,
      { requests_per_s: 2, completion_tokens_per_s: 4, ttft_p50_ms: 750, ttft_p95_ms: 975 },
    ],
    [
      'counters reset (a gateway restarted): what is there now is new',
      counts({ requests: 100, prompt_tokens: 1000, ttft: [50, 50, 0, 0] }),
      counts({ requests: 10, prompt_tokens: 20, ttft: [2, 0, 0, 0] }),
      10,
      { requests_per_s: 1, prompt_tokens_per_s: 2, ttft_p50_ms: 50 },
    ],
    [
      'streams that never got a token are not in time to first token',
      counts({ requests: 0 }),
      counts({ requests: 3, errors: 3 }),
      1,
      { requests_per_s: 3, errors_per_s: 3, ttft_p50_ms: null },
    ],
  ])('%s', (_name, before, after, seconds, expected) => {
    const p = pointBetween(before, after, { seconds, t });
    expect(p).toMatchObject({ t, ...expected });
  });
});

describe('sumCounts', () => {
  it('adds every counter and bucket; no models: zeros', () => {
    expect(
      sumCounts([
        counts({ requests: 1, errors: 1, prompt_tokens: 2, completion_tokens: 3, ttft: [1, 0, 0, 1] }),
        counts({ requests: 2, prompt_tokens: 5, ttft: [0, 2, 0, 0] }),
      ]),
    ).toEqual(counts({ requests: 3, errors: 1, prompt_tokens: 7, completion_tokens: 3, ttft: [1, 2, 0, 1] }));
    expect(sumCounts([])).toMatchObject({ requests: 0, ttft: { counts: [] } });
  });
});
