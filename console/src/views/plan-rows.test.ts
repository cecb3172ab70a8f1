import { describe, expect, it } from 'vitest';

import type { PlanAnswer, PlanOption } from '../api.js';
import { classesField, contextField, cut, planHead, planRows, REASON_WIDTH } from './plan-rows.js';

const option = (o: Partial<PlanOption>): PlanOption => ({
  profile: null,
  engine: 'vllm',
  class: 'l4-24g',
  cards: 1,
  tp: 1,
  fits: true,
  need_gib: 17.61,
  budget_gib: 20.69,
  weights_gib: 14.19,
  kv_gib: 1.75,
  max_context: 32768,
  reason: null,
  ...o,
});

const long =
  'needs 40.1 GiB a card on l4-24g (weights 35.4, KV 3.5 at 32768 tokens, overhead 1.2), the card gives 20.7 (vLLM 0.92 of 22.5): use a shorter context (at most 4096), or 2 cards';

describe('planRows', () => {
  it("has ctl plan's columns, '-' where not known, a long reason cut and kept whole", () => {
    const a: PlanAnswer = {
      model: 'qwen',
      context: 32768,
      options: [
        option({ profile: 'l4' }),
        option({ engine: 'llamacpp', class: 'cpu', cards: 0, need_gib: null, max_context: null }),
        option({ class: 't4-16g', fits: false, reason: long }),
      ],
    };
    const rows = planRows(a);
    expect(rows.map((r) => r.cells)).toEqual([
      ['l4', 'vllm', 'l4-24g', '1', 'yes', '17.6', '20.7', '14.2', '1.8', '32768', ''],
      ['-', 'llamacpp', 'cpu', '-', 'yes', '-', '20.7', '14.2', '1.8', '-', ''],
      ['-', 'vllm', 't4-16g', '1', 'no', '17.6', '20.7', '14.2', '1.8', '32768', cut(long)],
    ]);
    expect(rows[2]?.reason).toBe(long);
    expect(rows[2]?.short.length).toBeLessThanOrEqual(REASON_WIDTH);
    expect(rows[2]?.short).toBe(
      'needs 40.1 GiB a card on l4-24g … of 22.5): use a shorter context (at most 4096), or 2 cards',
    );
    expect(planHead(a)).toBe('qwen at 32768 tokens: per card, GiB');
    expect(planHead({ ...a, context: null })).toBe('qwen: per card, GiB');
  });
});

describe('the form', () => {
  it.each([
    ['', { ok: true, value: undefined }],
    [' 32768 ', { ok: true, value: 32768 }],
    [
      '100',
      { ok: false, message: 'context is a number of tokens from 256 to 16777216, such as 32768 (got "100")' },
    ],
    [
      '32k',
      { ok: false, message: 'context is a number of tokens from 256 to 16777216, such as 32768 (got "32k")' },
    ],
  ])('context %j', (text, want) => {
    expect(contextField(text)).toEqual(want);
  });

  it.each([
    ['', []],
    ['l4-24g, a100-80g,,', ['l4-24g', 'a100-80g']],
  ])('classes %j', (text, want) => {
    expect(classesField(text)).toEqual(want);
  });
});
