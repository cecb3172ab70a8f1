import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { configs, deepseekV2Lite, gemma2_9b, llama31_8b, qwen25_7b } from '../../test/fakes/gguf/models.js';
import type { GgufValue } from '../../test/fakes/gguf/writer.js';
import { ConfigShapeError, safetensorsBytes, shapeFromConfig } from './config-shape.js';
import { shapeFromGguf } from './gguf-shape.js';
import { type Known, type ModelShape, ModelShapeSchema } from './shape.js';

const value = <T>(k: Known<T>): T | string => (k.known ? k.value : `unknown: ${k.reason}`);

/** The figures a planner reads, flattened for a table. */
function figures(s: ModelShape) {
  return {
    architecture: s.architecture,
    layers: value(s.layers),
    heads: value(s.attentionHeads),
    kvHeads: value(s.kvHeads),
    keyHeadDim: value(s.keyHeadDim),
    valueHeadDim: value(s.valueHeadDim),
    slidingWindow: value(s.slidingWindow),
    mla: value(s.mla),
    trainedContext: value(s.trainedContext),
    dtype: value(s.dtype),
    kv: value(s.kv),
  };
}

const evenLayers = (n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => i % 2 === 0);

/*
 * Expected KV bytes per token (shared/reference/planner.md §4 "Worked values", f16/bf16 = 2 bytes):
 * - Llama-3.1-8B: 32 layers × 2 × 8 KV heads × 128 × 2 B = 131,072 B (128 KiB).
 * - Qwen2.5-7B: 28 × 2 × 4 × 128 × 2 = 57,344 B (56 KiB).
 * - Gemma-2-9B: 42 × 2 × 8 × 256 × 2 = 344,064 B (336 KiB); 21 of the layers are SWA-4096, so
 *   past the window 172,032 B (168 KiB) a token.
 * - DeepSeek-V2-Lite (MLA): 27 × (512 + 64) × 2 = 31,104 B.
 */
const llama = {
  layers: 32,
  heads: 32,
  kvHeads: 8,
  keyHeadDim: 128,
  valueHeadDim: 128,
  slidingWindow: null,
  mla: null,
};
const llamaKv = { elementBytes: 2, perToken: 131_072, fullPerToken: 131_072, slidingPerToken: 0 };
const qwen = {
  layers: 28,
  heads: 28,
  kvHeads: 4,
  keyHeadDim: 128,
  valueHeadDim: 128,
  slidingWindow: null,
  mla: null,
};
const qwenKv = { elementBytes: 2, perToken: 57_344, fullPerToken: 57_344, slidingPerToken: 0 };
const gemma = {
  layers: 42,
  heads: 16,
  kvHeads: 8,
  keyHeadDim: 256,
  valueHeadDim: 256,
  slidingWindow: { window: 4096, layers: evenLayers(42) },
  mla: null,
};
const gemmaKv = { elementBytes: 2, perToken: 344_064, fullPerToken: 172_032, slidingPerToken: 172_032 };
const deepseek = {
  layers: 27,
  heads: 16,
  kvHeads: 16,
  keyHeadDim: 192, // qk_nope_head_dim 128 + qk_rope_head_dim 64
  valueHeadDim: 128,
  slidingWindow: null,
  mla: { kvLoraRank: 512, qkRopeHeadDim: 64 },
};
const deepseekKv = { elementBytes: 2, perToken: 31_104, fullPerToken: 31_104, slidingPerToken: 0 };

describe('shapeFromGguf: the real headers', () => {
  it.each([
    [
      'Llama 3.1 8B',
      llama31_8b,
      { architecture: 'llama', ...llama, trainedContext: 131072, dtype: 'Q4_K_M', kv: llamaKv },
      8e9,
    ],
    [
      'Qwen2.5 7B Instruct',
      qwen25_7b,
      { architecture: 'qwen2', ...qwen, trainedContext: 32768, dtype: 'Q4_K_M', kv: qwenKv },
      7.6e9,
    ],
    [
      'Gemma 2 9B',
      gemma2_9b,
      { architecture: 'gemma2', ...gemma, trainedContext: 8192, dtype: 'Q4_K_M', kv: gemmaKv },
      9.2e9,
    ],
    [
      'DeepSeek-V2-Lite',
      deepseekV2Lite,
      { architecture: 'deepseek2', ...deepseek, trainedContext: 163840, dtype: 'Q4_K_M', kv: deepseekKv },
      'unknown: no tensor infos, and general.size_label (64x1.5B) is not a plain count',
    ],
  ])('%s', (_name, entries, expected, parameters) => {
    const shape = shapeFromGguf({ metadata: asMetadata(entries) });
    expect(figures(shape)).toEqual(expected);
    expect(shape.from).toBe('gguf');
    // From general.size_label without tensor infos; a MoE label is not a total and is not guessed.
    expect(value(shape.parameters)).toBe(parameters);
    expect(value(shape.weightBytes)).toBe('unknown: the header was read without its tensor infos');
  });

  it('counts parameters and weight bytes from tensor infos at ggml sizes', () => {
    const shape = shapeFromGguf({
      metadata: asMetadata(llama31_8b),
      tensorInfos: [
        { shape: [4096n, 128256n], dtype: 12 }, // Q4_K: 144 B per 256
        { shape: [4096n], dtype: 0 }, // F32
        { shape: [4096n, 1024n], dtype: 14 }, // Q6_K: 210 B per 256
      ],
    });
    expect(value(shape.parameters)).toBe(4096 * 128256 + 4096 + 4096 * 1024);
    expect(value(shape.weightBytes)).toBe(
      ((4096 * 128256) / 256) * 144 + 4096 * 4 + ((4096 * 1024) / 256) * 210,
    );
  });

  it('DeepSeek-V2-Lite in the newer MLA layout (latent as key/value_length, heads as *_mla) has the same shape', () => {
    // ik_llama.cpp #455/#262 loader dumps: key_length 576, value_length 512, key_length_mla 192, value_length_mla 128.
    const entries: [string, GgufValue][] = [
      ...deepseekV2Lite.filter(
        ([k]) =>
          !k.startsWith('deepseek2.attention.key_length') &&
          !k.startsWith('deepseek2.attention.value_length'),
      ),
      ['deepseek2.attention.key_length', { t: 'u32', v: 576 }],
      ['deepseek2.attention.value_length', { t: 'u32', v: 512 }],
      ['deepseek2.attention.key_length_mla', { t: 'u32', v: 192 }],
      ['deepseek2.attention.value_length_mla', { t: 'u32', v: 128 }],
    ];
    const shape = shapeFromGguf({ metadata: asMetadata(entries) });
    expect(figures(shape)).toEqual({
      architecture: 'deepseek2',
      ...deepseek,
      trainedContext: 163840,
      dtype: 'Q4_K_M',
      kv: deepseekKv,
    });
  });

  it("gemma2 without a sliding_window key gets llama.cpp's 4096", () => {
    const entries = gemma2_9b.filter(([k]) => k !== 'gemma2.attention.sliding_window');
    expect(value(shapeFromGguf({ metadata: asMetadata(entries) }).slidingWindow)).toEqual(
      gemma.slidingWindow,
    );
  });

  it('takes the file type from the tensors when general.file_type is missing', () => {
    const entries = llama31_8b.filter(([k]) => k !== 'general.file_type');
    const shape = shapeFromGguf({ metadata: asMetadata(entries), tensorInfos: [{ shape: [32n], dtype: 8 }] });
    expect(value(shape.dtype)).toBe('Q8_0');
  });
});

describe('shapeFromGguf: what cannot be read is unknown, with why, never 0', () => {
  const without = (entries: [string, GgufValue][], key: string) => entries.filter(([k]) => k !== key);

  it('a missing block count', () => {
    const shape = shapeFromGguf({ metadata: asMetadata(without(llama31_8b, 'llama.block_count')) });
    expect(shape.layers).toEqual({ known: false, reason: 'llama.block_count is not in the header' });
    expect(shape.kv).toEqual({ known: false, reason: 'llama.block_count is not in the header' });
  });

  it('no architecture', () => {
    const shape = shapeFromGguf({ metadata: asMetadata(without(llama31_8b, 'general.architecture')) });
    expect(shape.architecture).toBe('unknown');
    expect(shape.layers).toEqual({ known: false, reason: 'general.architecture is not in the header' });
    expect(shape.attentionHeads).toEqual({
      known: false,
      reason: 'general.architecture is not in the header',
    });
    expect(shape.kv).toEqual({ known: false, reason: 'general.architecture is not in the header' });
  });

  it('a hybrid architecture (Mamba layers with a recurrent state)', () => {
    const jamba: [string, GgufValue][] = [
      ['general.architecture', { t: 'str', v: 'jamba' }],
      ['jamba.block_count', { t: 'u32', v: 32 }],
      ['jamba.attention.head_count', { t: 'u32', v: 32 }],
      ['jamba.attention.head_count_kv', { t: 'arr', of: 'u32', v: [0, 0, 0, 0, 8, 0, 0, 0] }],
      ['jamba.ssm.conv_kernel', { t: 'u32', v: 4 }],
    ];
    const shape = shapeFromGguf({ metadata: asMetadata(jamba) });
    expect(shape.kv).toEqual({
      known: false,
      reason: 'jamba keeps a recurrent state in some layers, which KV bytes per token do not size',
    });
    expect(value(shape.kvHeads)).toBe(8);
  });

  it('a sliding window on an architecture whose layer pattern is not known', () => {
    const entries: [string, GgufValue][] = [
      ...qwen25_7b,
      ['qwen2.attention.sliding_window', { t: 'u32', v: 4096 }],
    ];
    const shape = shapeFromGguf({ metadata: asMetadata(entries) });
    expect(shape.slidingWindow).toEqual({
      known: false,
      reason: 'qwen2.attention.sliding_window is 4096, and which layers use it is not known for qwen2',
    });
    // Every layer charged in full: an upper bound, not a guess of 0.
    expect(value(shape.kv)).toEqual(qwenKv);
  });

  it('KV heads stored per layer are summed per layer', () => {
    const entries: [string, GgufValue][] = [
      ...without(llama31_8b, 'llama.attention.head_count_kv').map(([k, v]): [string, GgufValue] =>
        k === 'llama.block_count' ? [k, { t: 'u32', v: 4 }] : [k, v],
      ),
      ['llama.attention.head_count_kv', { t: 'arr', of: 'i32', v: [8, 4, 4, 2] }],
    ];
    const shape = shapeFromGguf({ metadata: asMetadata(entries) });
    expect(shape.kvHeadsPerLayer).toEqual([8, 4, 4, 2]);
    expect(value(shape.kvHeads)).toBe(8);
    expect(value(shape.kv)).toEqual({
      elementBytes: 2,
      perToken: 18 * 256 * 2,
      fullPerToken: 18 * 256 * 2,
      slidingPerToken: 0,
    });
  });
});

describe('shapeFromConfig: the real config.json files', () => {
  it.each([
    [
      'Llama 3.1 8B',
      configs.llama31_8b,
      { architecture: 'llama', ...llama, trainedContext: 131072, dtype: 'bf16', kv: llamaKv },
    ],
    [
      'Qwen2.5 7B Instruct',
      configs.qwen25_7b,
      { architecture: 'qwen2', ...qwen, trainedContext: 32768, dtype: 'bf16', kv: qwenKv },
    ],
    [
      'Gemma 2 9B',
      configs.gemma2_9b,
      { architecture: 'gemma2', ...gemma, trainedContext: 8192, dtype: 'bf16', kv: gemmaKv },
    ],
    [
      'DeepSeek-V2-Lite',
      configs.deepseekV2Lite,
      { architecture: 'deepseek_v2', ...deepseek, trainedContext: 163840, dtype: 'bf16', kv: deepseekKv },
    ],
  ])('%s', (_name, fixture, expected) => {
    const shape = shapeFromConfig({ config: fixture.json, weightBytes: fixture.weightBytes });
    expect(figures(shape)).toEqual(expected);
    expect(shape.from).toBe('config');
    expect(value(shape.weightBytes)).toBe(
      fixture.weightBytes ?? 'unknown: the sizes of the safetensors files are not known',
    );
    expect(value(shape.parameters)).toBe('unknown: config.json does not give a parameter count');
  });

  it('reads the text model of a vision-language config', () => {
    const shape = shapeFromConfig({
      config: { model_type: 'llava', text_config: configs.qwen25_7b.json, torch_dtype: 'bfloat16' },
      parameters: 8_000_000_000,
    });
    expect(figures(shape)).toEqual({
      architecture: 'qwen2',
      ...qwen,
      trainedContext: 32768,
      dtype: 'bf16',
      kv: qwenKv,
    });
    expect(value(shape.parameters)).toBe(8e9);
  });

  it('layer_types decides which layers use the window', () => {
    const shape = shapeFromConfig({
      config: {
        ...configs.llama31_8b.json,
        num_hidden_layers: 4,
        sliding_window: 1024,
        layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention'],
      },
    });
    expect(value(shape.slidingWindow)).toEqual({ window: 1024, layers: [0, 1, 2] });
    expect(value(shape.kv)).toEqual({
      elementBytes: 2,
      perToken: 16_384,
      fullPerToken: 4096,
      slidingPerToken: 12_288,
    });
  });

  it('a hybrid model (linear attention layers) has no KV bytes per token', () => {
    const shape = shapeFromConfig({
      config: {
        model_type: 'qwen3_next',
        num_hidden_layers: 4,
        num_attention_heads: 16,
        num_key_value_heads: 2,
        head_dim: 256,
        full_attention_interval: 4,
        max_position_embeddings: 262144,
        torch_dtype: 'bfloat16',
      },
    });
    expect(shape.kv).toEqual({
      known: false,
      reason: 'qwen3_next keeps a recurrent state in some layers, which KV bytes per token do not size',
    });
  });

  it('no torch_dtype: dtype and KV bytes unknown, with why', () => {
    const { torch_dtype: _dtype, ...rest } = configs.llama31_8b.json;
    const shape = shapeFromConfig({ config: rest });
    expect(shape.dtype).toEqual({ known: false, reason: 'config.json has no torch_dtype' });
    expect(shape.kv).toEqual({ known: false, reason: 'config.json has no torch_dtype' });
  });

  it('no num_hidden_layers: layers and KV unknown', () => {
    const { num_hidden_layers: _layers, ...rest } = configs.llama31_8b.json;
    const shape = shapeFromConfig({ config: rest });
    expect(shape.layers).toEqual({ known: false, reason: 'config.json has no num_hidden_layers' });
    expect(shape.kv).toEqual({ known: false, reason: 'config.json has no num_hidden_layers' });
  });

  it("a quantized checkpoint: its method, with KV at the activations' dtype", () => {
    const shape = shapeFromConfig({
      config: {
        ...configs.llama31_8b.json,
        quantization_config: { quant_method: 'fp8', activation_scheme: 'dynamic' },
      },
    });
    expect(value(shape.dtype)).toBe('fp8 (bf16 activations)');
    expect(value(shape.kv)).toEqual(llamaKv);
  });

  it('weight bytes: the sharded safetensors, never consolidated.safetensors beside them', () => {
    // Mistral-7B-v0.3's file names; sizes made up.
    const mistral = [
      { path: 'consolidated.safetensors', size: 14_000 },
      { path: 'model-00001-of-00003.safetensors', size: 5_000 },
      { path: 'model-00002-of-00003.safetensors', size: 4_900 },
      { path: 'model-00003-of-00003.safetensors', size: 4_100 },
      { path: 'model.safetensors.index.json', size: 24 },
      { path: 'sub/model.safetensors', size: 1 },
    ];
    expect(value(safetensorsBytes(mistral))).toBe(5_000 + 4_900 + 4_100);
    expect(value(safetensorsBytes(mistral.slice(0, 1)))).toBe(14_000);
    expect(value(safetensorsBytes([{ path: 'pytorch_model.bin', size: 10 }]))).toBe(
      'unknown: the repository has no .safetensors files at its top level',
    );
  });

  it('refuses what is not a config, saying which key', () => {
    expect(() => shapeFromConfig({ config: [] })).toThrow(ConfigShapeError);
    expect(() => shapeFromConfig({ config: { num_hidden_layers: 'many' } })).toThrow(
      "config.json does not read as a model's config: num_hidden_layers: Invalid input: expected number, received string",
    );
  });
});

describe('ModelShapeSchema', () => {
  it('takes every extracted shape back after a JSON round trip, and refuses a malformed one', () => {
    const shapes = [
      ...[llama31_8b, qwen25_7b, gemma2_9b, deepseekV2Lite].map((e) =>
        shapeFromGguf({ metadata: asMetadata(e) }),
      ),
      ...Object.values(configs).map((c) => shapeFromConfig({ config: c.json, weightBytes: c.weightBytes })),
    ];
    for (const shape of shapes) {
      expect(ModelShapeSchema.parse(JSON.parse(JSON.stringify(shape)))).toEqual(shape);
    }
    const broken = { ...shapes[0], layers: { known: false } };
    expect(ModelShapeSchema.safeParse(broken).success).toBe(false);
  });
});
