import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { engines } from '../../test/support/engines.js';
import { configs, llama31_8b } from '../../test/fakes/gguf/models.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { shapeFromGguf } from '../models/gguf-shape.js';
import { known, type ModelShape, unknown } from '../models/shape.js';
import { type OptionsInput, type PlanOption, planOptions } from './options.js';
import { GIB, MIB } from './units.js';

/** Llama-3.1-8B-Instruct Q4_K_M: its real header, 4.58 GiB of tensors. */
const llamaGguf: ModelShape = {
  ...shapeFromGguf({ metadata: asMetadata(llama31_8b) }),
  weightBytes: known(4.58 * GIB),
};
/** Qwen2.5-7B-Instruct's config.json and safetensors (15,231,233,024 bytes, 28 heads, 4 KV heads). */
const qwen7b = shapeFromConfig({
  config: configs.qwen25_7b.json,
  weightBytes: configs.qwen25_7b.weightBytes,
});

const l4 = { class: 'l4-24g', memoryBytes: 23034 * MIB };
const t4 = { class: 't4-16g', memoryBytes: 15360 * MIB };
/** No node reported it: classMemoryBytes' 81920 MiB. */
const a100 = { class: 'a100-80g' };
const cpu64 = { class: 'cpu', memoryBytes: 64 * GIB };

/** engine/class/cards and whether it fits, for comparing orders at a glance. */
const brief = (o: PlanOption) =>
  `${o.profile ?? '-'} ${o.engine} ${o.class} ×${o.cards} tp${o.tp} ${o.fits ? 'fits' : 'no'}`;

describe('planOptions: each engine on each class at the fewest cards that fit, best first', () => {
  const cases: [string, Omit<OptionsInput, 'engines'>, string[]][] = [
    [
      'Llama 3.1 8B GGUF on l4-24g, a100-80g and a node of 64 GiB: llama.cpp only, the roomier card first, CPUs last',
      { model: 'llama', shape: llamaGguf, profiles: [], classes: [l4, a100, cpu64], context: 8192 },
      ['- llamacpp a100-80g ×1 tp1 fits', '- llamacpp l4-24g ×1 tp1 fits', '- llamacpp cpu ×0 tp1 fits'],
    ],
    [
      'the same at its full 131072 tokens (4 slots: 64 GiB of KV): 4 L4s, one A100, too much for the node',
      { model: 'llama', shape: llamaGguf, profiles: [], classes: [l4, a100, cpu64] },
      ['- llamacpp a100-80g ×1 tp1 fits', '- llamacpp l4-24g ×4 tp1 fits', '- llamacpp cpu ×0 tp1 no'],
    ],
    [
      'Qwen2.5 7B safetensors on t4-16g: its 14.2 GiB of weights need tp 2 on vLLM, SGLang and TensorRT-LLM',
      { model: 'qwen', shape: qwen7b, profiles: [], classes: [t4], context: 32768 },
      ['- trtllm t4-16g ×2 tp2 fits', '- vllm t4-16g ×2 tp2 fits', '- sglang t4-16g ×2 tp2 fits'],
    ],
    [
      "Qwen2.5 7B's own profiles beside the engines' defaults (but those a profile repeats): tp 1 on an L4 before tp 2, and no CPUs for safetensors",
      {
        model: 'qwen',
        shape: qwen7b,
        profiles: [
          { name: 'vllm-tp2', engine: 'vllm', tp: 2, pp: 1, gpus_per_node: 2, args: [] },
          {
            name: 'sglang-l4',
            engine: 'sglang',
            tp: 1,
            pp: 1,
            gpus_per_node: 1,
            args: [],
            gpu_class: 'l4-24g',
          },
        ],
        classes: [l4, cpu64],
      },
      [
        '- trtllm l4-24g ×1 tp1 fits',
        '- vllm l4-24g ×1 tp1 fits',
        'sglang-l4 sglang l4-24g ×1 tp1 fits',
        // SGLang's defaults on one L4 say what sglang-l4 says: that row alone.
        'vllm-tp2 vllm l4-24g ×2 tp2 fits',
      ],
    ],
    [
      'a profile pinned to a class the caller did not name is left out; one pinned to no class runs on each (its short context the roomiest)',
      {
        model: 'qwen',
        shape: qwen7b,
        profiles: [
          { name: 'h100', engine: 'vllm', tp: 1, pp: 1, gpus_per_node: 1, args: [], gpu_class: 'h100-80g' },
          { name: 'any', engine: 'vllm', tp: 1, pp: 1, gpus_per_node: 1, args: ['--max-model-len', '4096'] },
        ],
        classes: [l4],
        named: true,
      },
      [
        'any vllm l4-24g ×1 tp1 fits',
        '- trtllm l4-24g ×1 tp1 fits',
        '- vllm l4-24g ×1 tp1 fits',
        '- sglang l4-24g ×1 tp1 fits',
      ],
    ],
  ];
  it.each(cases)('%s', (_name, input, order) => {
    expect(planOptions({ engines, ...input }).options.map(brief)).toEqual(order);
  });

  it('gives the per-card figures of the fullest card in GiB, and the context planned for', () => {
    const answer = planOptions({
      engines,
      model: 'qwen',
      shape: qwen7b,
      profiles: [],
      classes: [t4],
      context: 32768,
    });
    expect(answer).toMatchObject({ model: 'qwen', context: 32768 });
    expect(answer.options.find((o) => o.engine === 'vllm')).toEqual({
      profile: null,
      engine: 'vllm',
      class: 't4-16g',
      cards: 2,
      tp: 2,
      fits: true,
      need_gib: 9.53,
      budget_gib: 13.8,
      weights_gib: 7.09,
      kv_gib: 0.88,
      max_context: 32768,
      reason: null,
    });
  });

  it("plans a model's context_length unless a context is asked, and names the trained one otherwise", () => {
    const base = { model: 'qwen', shape: qwen7b, profiles: [], classes: [l4] };
    expect(planOptions({ engines, ...base }).context).toBe(32768);
    expect(planOptions({ engines, ...base, contextLength: 8192 }).context).toBe(8192);
    expect(planOptions({ engines, ...base, contextLength: 8192, context: 4096 }).context).toBe(4096);
  });

  it('a context that does not fit names the largest that does, and the figures that do not', () => {
    const [o] = planOptions({
      engines,
      model: 'llama',
      shape: llamaGguf,
      profiles: [],
      classes: [cpu64],
      context: 131072,
    }).options;
    expect(o).toMatchObject({ fits: false, need_gib: 70.2, budget_gib: 64, kv_gib: 64, max_context: 118272 });
    expect(o?.reason).toBe(
      'needs 70.2 GiB of RAM (weights 4.6, KV 64.0 at 524288 tokens (4 slots of 131072), overhead 1.6), the node has 64.0: a context up to 118272 fits with 4 slots',
    );
  });

  it('a profile refused before anything is counted has no figures, and its reason', () => {
    const [o] = planOptions({
      engines,
      model: 'llama',
      shape: llamaGguf,
      profiles: [{ name: 'wrong', engine: 'vllm', tp: 1, pp: 1, gpus_per_node: 1, args: [] }],
      classes: [{ class: 'l4-24g-mig-1g.5gb' }],
    }).options.filter((x) => x.profile === 'wrong');
    expect(o).toMatchObject({
      fits: false,
      need_gib: null,
      budget_gib: null,
      weights_gib: null,
      kv_gib: null,
    });
    expect(o?.reason).toBe(
      "vLLM does not run GGUF files here: use engine llamacpp for them, or vLLM on the model's original weights",
    );
  });

  it('what is not known is said, and such an option is not said to fit', () => {
    const noWeights = { ...qwen7b, weightBytes: unknown('no safetensors listed') };
    const [o] = planOptions({ engines, model: 'q', shape: noWeights, profiles: [], classes: [l4] }).options;
    expect(o).toMatchObject({ fits: false, need_gib: null });
    expect(o?.reason).toBe("not checked: the weights' size is not known (no safetensors listed)");
    const [ram] = planOptions({
      engines,
      model: 'l',
      shape: llamaGguf,
      profiles: [],
      classes: [{ class: 'cpu' }],
    }).options;
    expect(ram?.reason).toBe("not checked: the node's RAM is not known");
  });

  it('more headroom first among options of as many cards', () => {
    const { options } = planOptions({
      engines,
      model: 'llama',
      shape: llamaGguf,
      profiles: [],
      classes: [l4, { class: 'h100-80g' }],
      context: 8192,
    });
    expect(options.map((o) => o.class)).toEqual(['h100-80g', 'l4-24g']);
  });
});
