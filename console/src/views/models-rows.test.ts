import { describe, expect, it } from 'vitest';

import { modelView, gpusCheck, l4Profile } from './models-fixtures.js';
import { countRows, type CountAnswer } from './models-gpus.js';
import {
  gpuProfiles,
  isDeclared,
  originText,
  profileText,
  rolloutText,
  scaleRows,
  shapeText,
  sizeText,
} from './models-rows.js';

describe('sizeText', () => {
  it.each([
    [0, '0 B'],
    [663, '663 B'],
    [2048, '2.00 KiB'],
    [14 * 2 ** 30, '14.0 GiB'],
    [1.5 * 2 ** 40, '1.50 TiB'],
  ])('%d', (n, want) => {
    expect(sizeText(n)).toBe(want);
  });
});

describe('a model in words', () => {
  it('origin: revision, commit, files and their size; or the problem', () => {
    expect(originText(modelView())).toBe('main @ a09a354, 3 files, 14.0 GiB');
    expect(originText(modelView({ status: { problem: 'repository Qwen/x not found' } }))).toBe(
      'repository Qwen/x not found',
    );
    expect(originText(modelView({ status: {} }))).toBe('being resolved');
  });

  it('shape: architecture, layers, parameters, dtype, trained context', () => {
    expect(shapeText(modelView())).toBe('qwen2, 28 layers, 7.6B parameters, bf16, trained for 32768 tokens');
    expect(shapeText(modelView({ status: {} }))).toBe('not known yet');
  });

  it.each([
    ['one card', l4Profile, 'l4: vllm on l4-24g'],
    ['tensor parallel', { ...l4Profile, tp: 2, gpus_per_node: 2 }, 'l4: vllm on 2 × l4-24g (tp 2)'],
    [
      'over nodes',
      { ...l4Profile, tp: 4, pp: 2, gpus_per_node: 4, nodes: 2 },
      'l4: vllm on 8 × l4-24g (tp 4, pp 2, 2 nodes)',
    ],
    ['CPUs', { ...l4Profile, name: 'cpu', engine: 'llamacpp' as const, cpu: true }, 'cpu: llamacpp on CPUs'],
  ])('profile on %s', (_what, p, want) => {
    expect(profileText(p)).toBe(want);
  });

  it('declared, and the GPU profiles a change may name', () => {
    expect(isDeclared(modelView({ metadata: { origin: 'config' } }))).toBe(true);
    expect(isDeclared(modelView())).toBe(false);
    expect(
      gpuProfiles(modelView({ profiles: [l4Profile, { ...l4Profile, name: 'cpu', cpu: true }] })),
    ).toEqual(['l4']);
  });
});

describe('rolloutText', () => {
  const r = {
    model: 'qwen',
    change: 'gpus 1 → 2',
    mode: 'surge' as const,
    by: 'admin',
    started_at: '2026-12-03T13:00:00Z',
    replaced: 1,
    total: 2,
  };
  it.each([
    [
      'rolling',
      { ...r, state: 'rolling' as const },
      'gpus 1 → 2 (surge, by admin): 1 of 2 replicas running it',
    ],
    [
      'failed, with the error',
      { ...r, state: 'failed' as const, error: 'qwen-9: CUDA out of memory' },
      'gpus 1 → 2 (surge, by admin) failed: qwen-9: CUDA out of memory',
    ],
    ['done: nothing shown', { ...r, state: 'done' as const }, undefined],
    ['none', undefined, undefined],
  ])('%s', (_what, v, want) => {
    expect(rolloutText(v)).toBe(want);
  });
});

describe('countRows', () => {
  const refused = 'vLLM cannot spread qwen over 3 cards (tensor parallel 3): heads (28) …';
  const answers = new Map<number, CountAnswer>([
    [2, { ok: true, check: gpusCheck(1, 2, 9.53) }],
    [3, { ok: false, message: refused }],
    [4, { ok: true, check: gpusCheck(1, 4, 5.5, 'not checked: no node reports l4-24g') }],
  ]);
  it('the current count from the answers, each other count as checked or refused, unanswered as asking', () => {
    expect(countRows(1, answers, [1, 2, 3, 4, 5])).toEqual([
      { cards: 1, state: 'current', need_gib: 17.61, budget_gib: 20.69, max_context: 32768, reason: null },
      { cards: 2, state: 'fits', need_gib: 9.53, budget_gib: 20.69, max_context: 32768, reason: null },
      { cards: 3, state: 'refused', need_gib: null, budget_gib: null, max_context: null, reason: refused },
      {
        cards: 4,
        state: 'unchecked',
        need_gib: 5.5,
        budget_gib: 20.69,
        max_context: 32768,
        reason: 'not checked: no node reports l4-24g',
      },
      { cards: 5, state: 'asking', need_gib: null, budget_gib: null, max_context: null, reason: null },
    ]);
  });

  it('with no answer yet, the profile says the current count', () => {
    expect(countRows(2, new Map(), [1, 2]).map((r) => r.state)).toEqual(['asking', 'current']);
  });
});

describe('scaleRows', () => {
  it('is undefined for a model with a fixed count', () => {
    expect(scaleRows(modelView())).toBeUndefined();
  });

  it('shows the bounds, the count now, the last decision with its figures, the last request and cold start', () => {
    const m = modelView({
      autoscale: { min: 0, max: 4, target: 0.7, idle_s: 300 },
      status: {
        scale: {
          replicas: 3,
          last_decision: {
            at: '2026-12-03T18:00:00.000Z',
            from: 1,
            to: 3,
            direction: 'up',
            reason: 'load 2.1 over 1 replica: wants 3',
            figures: { queued: 4, desired: 3 },
          },
          last_request_at: '2026-12-03T18:00:01.000Z',
          cold_start: { ms: 2300, at: '2026-12-03T17:59:00.000Z' },
        },
      },
    });
    expect(scaleRows(m)).toEqual([
      ['Bounds', '0 to 4 replicas, target 0.7 load each, to zero after 300 s without a request'],
      ['Now', '3 replicas'],
      ['Last decision', '1 → 3 (up) at 2026-12-03T18:00:00.000Z: load 2.1 over 1 replica: wants 3'],
      ['Figures', 'queued 4, desired 3'],
      ['Last request', '2026-12-03T18:00:01.000Z'],
      ['Cold start', '2300 ms to the first token (2026-12-03T17:59:00.000Z)'],
    ]);
  });

  it('says when no decision was made yet', () => {
    const m = modelView({ replicas: 2, autoscale: { min: 1, max: 3, target: 0.5, idle_s: 300 } });
    expect(scaleRows(m)).toEqual([
      ['Bounds', '1 to 3 replicas, target 0.5 load each'],
      ['Now', '2 replicas'],
      ['Last decision', 'none yet'],
    ]);
  });
});
