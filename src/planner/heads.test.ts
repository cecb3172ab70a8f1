import { describe, expect, it } from 'vitest';

import { configs } from '../../test/fakes/gguf/models.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { splitsHeads, tensorParallelSizes } from './heads.js';

const shape = (config: object) => shapeFromConfig({ config: { torch_dtype: 'bfloat16', ...config } });
const llama8b = shape(configs.llama31_8b.json); // 32 heads, 8 KV heads
const qwen7b = shape(configs.qwen25_7b.json); // 28 heads, 4 KV heads
const mla = shape(configs.deepseekV2Lite.json); // 16 heads, MLA
const sixKv = shape({
  model_type: 'x',
  num_hidden_layers: 2,
  num_attention_heads: 24,
  num_key_value_heads: 6,
  hidden_size: 3072,
});
const noHeads = shape({ model_type: 'x', num_hidden_layers: 2, hidden_size: 3072 });

describe("splitsHeads: tensor parallel held to the heads (vLLM's rule and words)", () => {
  it.each([
    ['Llama-3.1-8B', llama8b, 1],
    ['Llama-3.1-8B', llama8b, 2],
    ['Llama-3.1-8B', llama8b, 8],
    // Past its 8 KV heads each card keeps a copy of one: allowed, tp a multiple of them.
    ['Llama-3.1-8B', llama8b, 16],
    ['Qwen2.5-7B', qwen7b, 4],
    // MLA's latent is on every card: only the attention heads count.
    ['DeepSeek-V2-Lite', mla, 8],
    ['a 6-KV-head model', sixKv, 3],
    ['a 6-KV-head model', sixKv, 12],
  ])('%s splits over %i cards', (_name, s, tp) => {
    expect(splitsHeads(s, tp)).toEqual({ ok: true });
  });

  it.each([
    [
      'attention heads that do not divide',
      llama8b,
      3,
      'Total number of attention heads (32) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4, 8, 16.',
    ],
    [
      "Qwen2.5-7B's 28 heads over 8 cards",
      qwen7b,
      8,
      'Total number of attention heads (28) must be divisible by tensor parallel size (8). Tensor parallel sizes that split this model: 1, 2, 4.',
    ],
    [
      'KV heads that tp neither divides nor multiplies (tp above them)',
      qwen7b,
      7,
      "7 is not divisible by 4: the model's 4 KV heads cannot be spread over tensor parallel size 7, which must divide them or be a multiple of them. Tensor parallel sizes that split this model: 1, 2, 4.",
    ],
    [
      'KV heads that tp neither divides nor multiplies (tp below them)',
      sixKv,
      4,
      "6 is not divisible by 4: the model's 6 KV heads cannot be spread over tensor parallel size 4, which must divide them or be a multiple of them. Tensor parallel sizes that split this model: 1, 2, 3, 6, 12.",
    ],
  ])('refuses %s', (_name, s, tp, reason) => {
    expect(splitsHeads(s, tp)).toEqual({ ok: false, reason });
  });

  it('says what it could not check, and does not refuse for it', () => {
    expect(splitsHeads(noHeads, 2)).toEqual({
      ok: true,
      unchecked:
        'whether 2 cards split its attention heads is not known: config.json has no num_attention_heads',
    });
  });

  it('lists the sizes that split a model', () => {
    expect(tensorParallelSizes(llama8b, 8)).toEqual([1, 2, 4, 8]);
    expect(tensorParallelSizes(mla)).toEqual([1, 2, 4, 8, 16]);
  });
});
