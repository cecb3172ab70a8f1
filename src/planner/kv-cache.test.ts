import { describe, expect, it } from 'vitest';

import { configs } from '../../test/fakes/gguf/models.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { kvBytes, kvCacheDtypeBytes, kvLayers, kvPerToken } from './kv-cache.js';

const shape = (config: object) => shapeFromConfig({ config });
const llama8b = shape(configs.llama31_8b.json);
const gemma = shape(configs.gemma2_9b.json);
const mla = shape(configs.deepseekV2Lite.json);
const f16 = { kBytes: 2, vBytes: 2 };

function perToken(s: ReturnType<typeof shape>, o: Parameters<typeof kvLayers>[1]): number {
  const kv = kvLayers(s, o);
  if (!kv.known) throw new Error(kv.reason);
  return kvPerToken(kv.value);
}

/*
 * KV per token on one card (planner.md §4): 2 × layers × max(1, kv_heads ÷ tp) × head size × bytes.
 * Llama-3.1-8B: 32 × 2 × 8 × 128 × 2 = 131,072 B (16 GiB at 131072 tokens, the HF blog's 15.62 "GB"
 * at 128,000). DeepSeek-V2-Lite (MLA): 27 × 576 × 2 = 31,104 B, on every card.
 */
describe('KV bytes per token on one card', () => {
  it.each([
    ['Llama-3.1-8B, one card', llama8b, { tp: 1, ...f16 }, 131_072],
    ['Llama-3.1-8B over 2 cards', llama8b, { tp: 2, ...f16 }, 65_536],
    ['Llama-3.1-8B over 8 cards: one KV head each', llama8b, { tp: 8, ...f16 }, 16_384],
    ['Llama-3.1-8B over 16 cards: still one head each, replicated', llama8b, { tp: 16, ...f16 }, 16_384],
    ['Llama-3.1-8B, fp8 cache', llama8b, { tp: 1, kBytes: 1, vBytes: 1 }, 65_536],
    [
      'Llama-3.1-8B, llama.cpp q8_0 K and f16 V',
      llama8b,
      { tp: 1, kBytes: 34 / 32, vBytes: 2 },
      32 * 8 * 128 * (34 / 32 + 2),
    ],
    ['DeepSeek-V2-Lite (MLA)', mla, { tp: 1, ...f16 }, 31_104],
    ['DeepSeek-V2-Lite over 4 cards: the latent is not split', mla, { tp: 4, ...f16 }, 31_104],
    ['Gemma-2-9B (head size 256)', gemma, { tp: 1, ...f16 }, 344_064],
  ])('%s', (_name, s, o, bytes) => {
    expect(perToken(s, o)).toBe(bytes);
  });

  it("bounds sliding-window layers by their window: Gemma 2's even layers hold 4096 tokens", () => {
    const kv = kvLayers(gemma, { tp: 1, ...f16 });
    if (!kv.known) throw new Error(kv.reason);
    expect(kv.value.window).toBe(4096);
    expect(kv.value.sliding.filter(Boolean)).toHaveLength(21);
    expect(kv.value.sliding[0]).toBe(true);
    expect(kv.value.sliding[1]).toBe(false);
    // 21 full layers × 8192 B × 8192 tokens + 21 sliding ones × 8192 B × 4096.
    expect(kvBytes(kv.value, { from: 0, to: 42, tokens: 8192, swaTokens: 4096 })).toBe(
      21 * 8192 * 8192 + 21 * 8192 * 4096,
    );
    const full = kvLayers(gemma, { tp: 1, ...f16, slidingAsFull: true });
    expect(full.known && full.value.sliding.some(Boolean)).toBe(false);
  });

  it('says why where the shape cannot size it, instead of guessing', () => {
    const hybrid = kvLayers(
      shape({
        model_type: 'qwen3_next',
        num_hidden_layers: 48,
        num_attention_heads: 16,
        num_key_value_heads: 2,
        head_dim: 256,
        torch_dtype: 'bfloat16',
      }),
      { tp: 1, ...f16 },
    );
    expect(hybrid).toMatchObject({
      known: false,
      reason: 'qwen3_next keeps a recurrent state in some layers, which KV bytes per token do not size',
    });
    // A dtype the config does not give is no reason: the engine's cache type sizes the values.
    const noDtype = kvLayers(shape({ ...configs.llama31_8b.json, torch_dtype: undefined }), {
      tp: 1,
      ...f16,
    });
    expect(noDtype.known && kvPerToken(noDtype.value)).toBe(131_072);
    expect(noDtype.notes).toEqual([
      "the model's dtype is not known (config.json has no torch_dtype): its KV cache is counted at the engine's own type",
    ]);
  });

  it("reads vLLM's and SGLang's cache dtypes", () => {
    expect(kvCacheDtypeBytes(undefined, 2)).toBe(2);
    expect(kvCacheDtypeBytes('fp8_e4m3', 2)).toBe(1);
    expect(kvCacheDtypeBytes('bfloat16', 4)).toBe(2);
    expect(kvCacheDtypeBytes('int3', 2)).toBeUndefined();
  });
});
