import { describe, expect, it } from 'vitest';

import type { GpusSideView, ModelGpusView } from '../../protocol/model-gpus-views.js';
import { UsageError } from '../usage-error.js';

import { gpusCount, gpusText } from './model-gpus.js';

describe('llmgw ctl model gpus: the count', () => {
  it.each([
    ['1', 1],
    ['8', 8],
    ['64', 64],
  ])('takes %j', (text, n) => {
    expect(gpusCount(text)).toBe(n);
  });

  it.each(['0', '65', '-1', '2.5', 'two', '', ' 2', '0x2', '1e1'])('refuses %j as a usage error', (text) => {
    expect(() => gpusCount(text)).toThrow(UsageError);
    expect(() => gpusCount(text)).toThrow(
      `the count is a whole number of cards from 1 to 64, such as 2 (got "${text}")`,
    );
  });
});

describe('llmgw ctl model gpus: what it prints', () => {
  const side = (more: Partial<GpusSideView>): GpusSideView => ({
    cards: 1,
    tp: 1,
    pp: 1,
    need_gib: 17.61,
    budget_gib: 20.69,
    fits: true,
    max_context: 32768,
    reason: null,
    ...more,
  });
  const view: ModelGpusView = {
    model: 'qwen-7b',
    profiles: [
      {
        profile: 'l4',
        engine: 'vllm',
        class: 'l4-24g',
        before: side({}),
        after: side({ cards: 2, tp: 2, need_gib: 9.53 }),
        dropped_args: ['--tensor-parallel-size 1'],
      },
    ],
    rollout: {
      model: 'qwen-7b',
      change: 'gpus 1 → 2',
      mode: 'surge',
      by: 'admin',
      started_at: '2026-12-03T12:00:00.000Z',
      state: 'rolling',
      replaced: 0,
      total: 2,
    },
    note: null,
  };

  it('says before → after, what each card needs, and that replicas start beside the old ones', () => {
    expect(gpusText(view).split('\n')).toEqual([
      'model "qwen-7b", profile "l4" (vllm on l4-24g): 1 → 2 cards of a node a replica, tensor parallel 1 → 2',
      '  need a card: 17.6 of 20.7 GiB, fits → 9.5 of 20.7 GiB, fits',
      '  left out of its args: --tensor-parallel-size 1',
      'Its 2 replicas start again beside the old ones, each old one stopping once its successor is ready.',
      'llmgw ctl model show qwen-7b follows the change.',
    ]);
  });

  it('in place, one at a time; llama.cpp by cards alone; what was not checked', () => {
    const p = view.profiles[0] as ModelGpusView['profiles'][number];
    const unknown = { need_gib: null, budget_gib: null, fits: null, max_context: null };
    const text = gpusText({
      ...view,
      profiles: [
        {
          ...p,
          engine: 'llamacpp',
          before: side({ ...unknown }),
          after: side({ ...unknown, cards: 4 }),
          dropped_args: [],
        },
      ],
      rollout: { ...view.rollout, mode: 'in-place', total: 1 },
      note: 'not checked: its shape is not known (no config.json)',
    });
    expect(text.split('\n')).toEqual([
      'model "qwen-7b", profile "l4" (llamacpp on l4-24g): 1 → 4 cards of a node a replica, its layers split over them',
      '  need a card: not checked → not checked',
      'Its replica starts again in place: it stops before its successor starts.',
      'llmgw ctl model show qwen-7b follows the change.',
      'Note: not checked: its shape is not known (no config.json)',
    ]);
  });

  it("says a roll that failed at once, with the engine's error", () => {
    const failed = { ...view.rollout, state: 'failed' as const, error: 'replica q-4: exited with code 1' };
    expect(gpusText({ ...view, rollout: failed })).toContain(
      'The change failed to roll: replica q-4: exited with code 1',
    );
  });

  it('with no replica running what changed, says none restarts', () => {
    expect(gpusText({ ...view, rollout: { ...view.rollout, total: 0 } })).toContain(
      'No running replica runs what changed, so none restarts: new ones start with the change.',
    );
  });
});
