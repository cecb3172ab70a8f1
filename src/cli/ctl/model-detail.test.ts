import { describe, expect, it } from 'vitest';

import { deepseekV2Lite, gemma2_9b } from '../../../test/fakes/gguf/models.js';
import { asMetadata } from '../../../test/fakes/gguf/metadata.js';
import { shapeFromGguf } from '../../models/gguf-shape.js';
import { progressText } from '../../protocol/cache-views.js';
import type { PlanOption } from '../../planner/index.js';
import type { ModelView } from '../../protocol/model-views.js';

import { formatCount, layersSummary, modelDetail } from './model-detail.js';

const view = (status: ModelView['status'], origin: 'config' | 'api' = 'config'): ModelView => ({
  name: 'm',
  source: 'hf://org/m-GGUF/m-Q4_K_M.gguf',
  replicas: 1,
  profiles: [
    {
      name: 'cpu',
      engine: 'llamacpp',
      cpu: true,
      tp: 1,
      pp: 1,
      gpus_per_node: 0,
      nodes: 1,
      args: [],
      env: {},
      adapters: [],
    },
  ],
  metadata: origin === 'config' ? { origin } : { origin, version: 3, created_by: 'ops' },
  status,
});

describe('which layers, in a few words', () => {
  it.each([
    [[0, 1, 2, 3], 4, 'all 4'],
    [[0, 2, 4, 6, 8, 10], 12, '6 of 12: 0, 2, … 10 (every 2nd)'],
    [[20, 21, 22, 23, 24, 25, 26, 27], 28, '8 of 28: 20-27'],
    [[0, 1, 2, 3, 4, 6, 7, 8, 9, 10], 12, '10 of 12: 0-4, 6-10'],
    [[3, 7], undefined, '2: 3, 7'],
    [[], 12, 'none'],
  ])('%j of %s layers is %j', (layers, total, text) => {
    expect(layersSummary(layers, total)).toBe(text);
  });

  it('counts parameters as model cards do', () => {
    expect(formatCount(8_030_261_248)).toBe('8.03 B');
    expect(formatCount(494_032_768)).toBe('494 M');
    expect(formatCount(1000)).toBe('1000');
  });
});

describe('llmgw ctl model show', () => {
  it("summarises Gemma 2's sliding window, and says what the header does not give", () => {
    const shape = shapeFromGguf({ metadata: asMetadata(gemma2_9b) });
    const text = modelDetail(view({ shape, resolved_at: '2026-01-01T00:00:00.000Z' }));
    expect(text).toMatch(/^Name: +m \(declared in the settings file\)$/m);
    expect(text).toMatch(/^Origin: +unknown$/m);
    expect(text).toMatch(/^ {2}Sliding window: +4096 tokens, on layers 21 of 42: 0, 2, … 40 \(every 2nd\)$/m);
    expect(text).toMatch(/^ {2}Head dims: +key 256, value 256$/m);
    expect(text).toMatch(/^ {2}Weights: +unknown \(the header was read without its tensor infos\)$/m);
    expect(text).toMatch(
      /^ {2}KV cache: +\d+ B per token at 2 bytes a value \(full attention \d+ B, sliding window \d+ B\)$/m,
    );
  });

  it("shows DeepSeek-V2-Lite's MLA latent", () => {
    const shape = shapeFromGguf({ metadata: asMetadata(deepseekV2Lite) });
    const text = modelDetail(view({ shape, resolved_at: '2026-01-01T00:00:00.000Z' }, 'api'));
    expect(text).toMatch(/^Name: +m \(added through the API by ops, version 3\)$/m);
    expect(text).toMatch(/^ {2}MLA latent: +512 \+ rope 64$/m);
    expect(text).toMatch(/^ {2}KV cache: +31104 B per token at 2 bytes a value$/m);
  });

  it('says a declared model is not resolved yet, and shows the problem of one that is not known', () => {
    expect(modelDetail(view({}))).toMatch(
      /^Origin: +not resolved yet \(llmgw ctl model resolve m resolves it now\)$/m,
    );
    const text = modelDetail(
      view({ problem: '/m.gguf is not on the control plane', resolved_at: '2026-01-01T00:00:00.000Z' }),
    );
    expect(text).toMatch(/^Shape: +unknown$/m);
    expect(text).toMatch(/^Problem: \/m\.gguf is not on the control plane$/m);
  });
});

describe('what runs of a model, in model show', () => {
  it('shows a downloading replica with its progress, and each node downloading', () => {
    const download = { done: 3.2e9, total: 4.7e9, rate_bps: 85e6, eta_s: 18 };
    const text = modelDetail(view({ resolved_at: '2026-01-01T00:00:00.000Z' }), {
      replicas: [
        {
          id: 'm-1',
          model: 'm',
          profile: 'cpu',
          engine: 'llamacpp',
          state: 'downloading',
          download,
          node: 'gpu-1',
          restarts: 0,
          shards: [],
        },
        {
          id: null,
          model: 'm',
          profile: null,
          engine: 'llamacpp',
          state: 'pending',
          reason: 'no room',
          restarts: 0,
          shards: [],
        },
      ],
      downloads: [
        { node: 'gpu-1', model: 'm', source: 'hf://org/m-GGUF', state: 'downloading', ...download },
        {
          node: 'gpu-2',
          model: 'm',
          source: 'hf://org/m-GGUF',
          state: 'failed',
          error: 'disk full',
          done: 0,
          total: 4.7e9,
          rate_bps: 0,
        },
      ],
    });
    expect(text).toContain(
      [
        'Replicas:',
        `  m-1  downloading (${progressText(download)}) on gpu-1`,
        '  (waiting for room)  pending: no room',
        '',
        'Downloads:',
        `  gpu-1  downloading, ${progressText(download)}`,
        '  gpu-2  failed, disk full',
      ].join('\n'),
    );
    expect(progressText(download)).toMatch(/ of .*\/s, .* left$/);
  });

  it('says when none runs, and shows no downloads section without any', () => {
    const text = modelDetail(view({}), { replicas: [], downloads: [] });
    expect(text).toMatch(/^Replicas: +none running$/m);
    expect(text).not.toContain('Downloads:');
  });
});

describe('a change rolling over a model, in model show', () => {
  const rollout = {
    model: 'm',
    change: 'gpus 1 → 2',
    mode: 'surge' as const,
    by: 'admin',
    started_at: '2026-01-01T00:00:00.000Z',
    replaced: 1,
    total: 2,
  };
  it('shows how far a rolling change is', () => {
    const text = modelDetail(view({ rollout: { ...rollout, state: 'rolling' } }));
    expect(text).toMatch(/^Change: +gpus 1 → 2, surge, by admin: 1 of 2 replicas replaced$/m);
  });
  it("shows a failed change with the replica and its engine's error", () => {
    const text = modelDetail(
      view({
        rollout: {
          ...rollout,
          mode: 'in-place',
          state: 'failed',
          replaced: 0,
          finished_at: '2026-01-01T00:01:00.000Z',
          error: 'replica m-3: llama-server exited with code 1',
        },
      }),
    );
    expect(text).toMatch(
      /^Change: +gpus 1 → 2, in-place, by admin: failed: replica m-3: llama-server exited with code 1$/m,
    );
  });
  it('shows no change once it is done', () => {
    const text = modelDetail(view({ rollout: { ...rollout, state: 'done', replaced: 2 } }));
    expect(text).not.toContain('Change:');
  });
});

describe("llmgw ctl model show's memory", () => {
  const option: PlanOption = {
    profile: 'main',
    engine: 'vllm',
    class: 'l4-24g',
    cards: 1,
    tp: 1,
    fits: false,
    need_gib: 32.7,
    budget_gib: 20.7,
    weights_gib: 15,
    kv_gib: 16,
    max_context: 33024,
    reason: 'needs 32.7 GiB a card on l4-24g: a context up to 33024 fits, or 2 cards',
  };

  it('says per profile whether it fits, as ctl plan does, and leaves out the engines no profile names', () => {
    const text = modelDetail(view({}), {
      plan: {
        model: 'm',
        context: 131072,
        options: [
          option,
          {
            ...option,
            class: 'a100-80g',
            fits: true,
            need_gib: 40.2,
            budget_gib: 73.6,
            max_context: 131072,
            reason: null,
          },
          { ...option, profile: null, engine: 'sglang' },
        ],
      },
    });
    expect(text).toContain('Memory at 131072 tokens (llmgw ctl plan m for every engine and class):');
    expect(text).toContain(
      '  main  vllm on l4-24g ×1: does not fit: needs 32.7 GiB a card on l4-24g: a context up to 33024 fits, or 2 cards',
    );
    expect(text).toContain(
      '  main  vllm on a100-80g ×1: fits, 40.2 of 73.6 GiB a card, a context up to 131072 fits',
    );
    expect(text).not.toContain('sglang');
  });

  it('says why it could not plan', () => {
    expect(modelDetail(view({}), { plan: { error: 'no class on a cluster without nodes' } })).toMatch(
      /^Memory: +not planned: no class on a cluster without nodes$/m,
    );
  });
});
