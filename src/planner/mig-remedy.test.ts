import { describe, expect, it } from 'vitest';

import { configs } from '../../test/fakes/gguf/models.js';
import { engines } from '../../test/support/engines.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { known } from '../models/shape.js';
import { classMemoryBytes } from './class-memory.js';
import { withClassesThatFit } from './classes-that-fit.js';
import { planProfile } from './plan.js';
import type { PlanInput } from './plan-input.js';
import type { PlanProfile } from './types.js';
import { GIB } from './units.js';

const llama8b = shapeFromConfig({
  config: configs.llama31_8b.json,
  weightBytes: configs.llama31_8b.weightBytes,
});
const llama70b = shapeFromConfig({
  config: {
    ...configs.llama31_8b.json,
    hidden_size: 8192,
    intermediate_size: 28672,
    num_hidden_layers: 80,
    num_attention_heads: 64,
  },
  weightBytes: 141_107_412_992,
});
const dims = { hidden: 4096, feedForward: 14336, vocab: 128256 };
const prof = (engine: PlanProfile['engine']): PlanProfile => ({
  name: 'p',
  engine,
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  args: [],
});
const on = (cls: string) => ({ class: cls, memoryBytes: classMemoryBytes(cls) ?? NaN });
const vllm = { dims, profile: prof('vllm'), engineVersion: '0.21.0' };

describe('planProfile: what a MIG instance too small is told to use instead of more cards', () => {
  const cases: [string, Omit<PlanInput, 'engines'>, string][] = [
    [
      'TensorRT-LLM, weights larger than the instance: its budget is the instance, and the larger profiles and card that hold it',
      { shape: llama8b, dims, profile: prof('trtllm'), device: on('a100-80g-mig-1g.10gb'), context: 4096 },
      "needs 18.1 GiB a card on a100-80g-mig-1g.10gb (weights 15.0, KV 0.5 at 4096 tokens, overhead 2.7), the card gives 9.8 (all of it: the weights and TensorRT-LLM's buffers leave nothing free for its KV cache): no context fits beside the weights: a larger MIG profile such as a100-80g-mig-1g.20gb or a100-80g-mig-2g.20gb, or a whole a100-80g card",
    ],
    [
      'a context that fits the instance first, then the least larger profiles that hold the one asked',
      { ...vllm, shape: llama8b, device: on('a100-80g-mig-1g.20gb'), context: 131072 },
      "needs 32.7 GiB a card on a100-80g-mig-1g.20gb (weights 15.0, KV 16.0 at 131072 tokens, overhead 1.7), the card gives 18.1 (vLLM's 0.92 of 19.6): a context up to 11264 fits, or a larger MIG profile such as a100-80g-mig-3g.40gb or a100-80g-mig-4g.40gb, or a whole a100-80g card",
    ],
    [
      "an A100-40GB's smallest instance: that card's profiles",
      { ...vllm, shape: llama8b, device: on('a100-40g-mig-1g.5gb'), context: 4096 },
      "needs 17.2 GiB a card on a100-40g-mig-1g.5gb (weights 15.0, KV 0.5 at 4096 tokens, overhead 1.7), the card gives 4.4 (vLLM's 0.92 of 4.8): no context fits beside the weights: a larger MIG profile such as a100-40g-mig-3g.20gb or a100-40g-mig-4g.20gb, or a whole a100-40g card",
    ],
    [
      'no larger profile holds it, the whole card does',
      {
        ...vllm,
        shape: { ...llama8b, weightBytes: known(68 * GIB) },
        device: on('a100-80g-mig-3g.40gb'),
        context: 4096,
      },
      "needs 70.2 GiB a card on a100-80g-mig-3g.40gb (weights 68.0, KV 0.5 at 4096 tokens, overhead 1.7), the card gives 36.3 (vLLM's 0.92 of 39.5): no context fits beside the weights: a whole a100-80g card",
    ],
    [
      'not even the whole card holds it: another class, not more cards',
      { ...vllm, shape: llama70b, dims: undefined, device: on('h200-141g-mig-3g.71gb'), context: 4096 },
      "needs 134.5 GiB a card on h200-141g-mig-3g.71gb (weights 131.4, KV 1.3 at 4096 tokens, overhead 1.9), the card gives 64.2 (vLLM's 0.92 of 69.8): no context fits beside the weights: a class with more memory",
    ],
    [
      "placement's quick plan (maxCards 0) tries no other class",
      { ...vllm, shape: llama8b, device: on('a100-80g-mig-1g.10gb'), context: 4096, maxCards: 0 },
      "needs 17.2 GiB a card on a100-80g-mig-1g.10gb (weights 15.0, KV 0.5 at 4096 tokens, overhead 1.7), the card gives 9.0 (vLLM's 0.92 of 9.8): no context fits beside the weights: a class with more memory",
    ],
    [
      'a whole card keeps more cards, or a class with more memory',
      { ...vllm, shape: llama70b, dims: undefined, device: on('l4-24g'), context: 4096, maxCards: 2 },
      "needs 134.5 GiB a card on l4-24g (weights 131.4, KV 1.3 at 4096 tokens, overhead 1.9), the card gives 20.7 (vLLM's 0.92 of 22.5): no context fits beside the weights: more cards, or a class with more memory",
    ],
  ];
  it.each(cases)('%s', (_name, input, reason) => {
    const plan = planProfile({ engines, ...input });
    expect(plan.fits).toBe(false);
    expect(plan.reason).toBe(reason);
    for (const card of plan.perCard)
      expect(card.budget).toBeLessThanOrEqual(classMemoryBytes(plan.class) ?? NaN);
  });
});

describe('withClassesThatFit: the classes of a cluster after the reason', () => {
  it('names those after a class with more memory, or as another remedy', () => {
    expect(
      withClassesThatFit('no context fits beside the weights: a class with more memory', ['h200-141g']),
    ).toBe('no context fits beside the weights: a class with more memory such as h200-141g');
    expect(withClassesThatFit('a context up to 4096 fits, or 2 cards', ['a100-80g', 'h100-80g'])).toBe(
      'a context up to 4096 fits, or 2 cards, or a100-80g or h100-80g',
    );
  });

  it('leaves out classes the reason names already, and says how many it did not show', () => {
    const reason =
      'a larger MIG profile such as a100-80g-mig-3g.40gb or a100-80g-mig-4g.40gb, or a whole a100-80g card';
    expect(withClassesThatFit(reason, ['a100-80g', 'a100-80g-mig-3g.40gb'])).toBe(reason);
    const many = ['a-1g', 'b-1g', 'c-1g', 'd-1g', 'e-1g', 'f-1g', 'g-1g', 'h-1g'];
    expect(withClassesThatFit(reason, ['a100-80g', ...many])).toBe(
      `${reason}, or a-1g or b-1g or c-1g or d-1g or e-1g or f-1g (and 2 more classes)`,
    );
  });
});
