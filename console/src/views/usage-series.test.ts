import { describe, expect, it } from 'vitest';

import type { UsageRow } from '../api.js';
import { usageNames, usageQuery, usageSeries, usageTotals } from './usage-series.js';

const row = (
  hour: string,
  key: string,
  model: string,
  requests: number,
  prompt = 0,
  completion = 0,
): UsageRow => ({
  hour: `2026-12-03T${hour}:00:00.000Z`,
  key_name: key,
  model,
  requests,
  prompt_tokens: prompt,
  completion_tokens: completion,
});

// Newest first, as the API sends them.
const rows = [
  row('12', 'ci', 'qwen2.5-7b', 3, 30, 60),
  row('12', 'app', 'qwen2.5-7b', 1, 10, 5),
  row('10', 'app', 'llama:sql', 5, 100, 200),
  row('10', 'ci', 'qwen2.5-7b', 2, 20, 20),
];

describe('usageQuery', () => {
  it.each([
    [{}, ''],
    [{ key: ' ', model: '' }, ''],
    [{ model: 'llama:sql', key: 'ci' }, '?key=ci&model=llama%3Asql'],
    [{ since: '2026-12-03T00:00:00.000Z' }, '?since=2026-12-03T00%3A00%3A00.000Z'],
  ])('%j', (filter, want) => {
    expect(usageQuery(filter)).toBe(want);
  });
});

describe('usageSeries', () => {
  it('stacks requests by model per hour, oldest first, quiet hours as zeros', () => {
    expect(usageSeries(rows, 'model', 'requests')).toEqual({
      names: ['qwen2.5-7b', 'llama:sql'],
      points: [
        { hour: '2026-12-03T10:00:00.000Z', values: { 'qwen2.5-7b': 2, 'llama:sql': 5 } },
        { hour: '2026-12-03T11:00:00.000Z', values: { 'qwen2.5-7b': 0, 'llama:sql': 0 } },
        { hour: '2026-12-03T12:00:00.000Z', values: { 'qwen2.5-7b': 4, 'llama:sql': 0 } },
      ],
    });
  });

  it('stacks tokens (prompt and completion) by key, largest total first', () => {
    expect(usageSeries(rows, 'key', 'tokens')).toEqual({
      names: ['app', 'ci'],
      points: [
        { hour: '2026-12-03T10:00:00.000Z', values: { app: 300, ci: 40 } },
        { hour: '2026-12-03T11:00:00.000Z', values: { app: 0, ci: 0 } },
        { hour: '2026-12-03T12:00:00.000Z', values: { app: 15, ci: 90 } },
      ],
    });
  });

  it('has no points for no rows', () => {
    expect(usageSeries([], 'model', 'requests')).toEqual({ points: [], names: [] });
  });
});

describe('usageTotals', () => {
  it('sums per model, most requests first, with the sum of all', () => {
    expect(usageTotals(rows, 'model')).toEqual({
      rows: [
        { name: 'qwen2.5-7b', requests: 6, promptTokens: 60, completionTokens: 85 },
        { name: 'llama:sql', requests: 5, promptTokens: 100, completionTokens: 200 },
      ],
      all: { name: 'all', requests: 11, promptTokens: 160, completionTokens: 285 },
    });
  });
});

describe('usageNames', () => {
  it('lists the keys and models seen, sorted, once each', () => {
    expect(usageNames(rows)).toEqual({ keys: ['app', 'ci'], models: ['llama:sql', 'qwen2.5-7b'] });
  });
});
