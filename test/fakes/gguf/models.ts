/**
 * The real header values of four models' GGUF files and the real values of their config.json,
 * for the shape extractors and the fake hub. Sources, per figure:
 * - GGUF key names: llama.cpp gguf-py `constants.py` (Keys.LLM / Keys.Attention / Keys.Rope) and
 *   `convert_hf_to_gguf.py` (what each architecture writes); gpus-and-engines.md §E.
 * - Values: each model's config.json on the Hugging Face hub, as converted by convert_hf_to_gguf.py
 *   (block_count = num_hidden_layers, head_count_kv = num_key_value_heads, context_length =
 *   max_position_embeddings, ...); shared/reference/planner.md §5 (litgpt config.py, which cites
 *   each config.json; a transformers dump of DeepSeek-V2-Lite; model.safetensors.index.json).
 * The tensors are a few tiny ones (real names, made-up small shapes): the extractors read the
 * header, and the range-request test needs only a file larger than what the reader fetches.
 */
import type { GgufSpec, GgufValue } from './writer.js';

const u32 = (v: number): GgufValue => ({ t: 'u32', v });
const f32 = (v: number): GgufValue => ({ t: 'f32', v });
const str = (v: string): GgufValue => ({ t: 'str', v });

/** GGMLFileQuantizationType 15: MOSTLY_Q4_K_M. 7: MOSTLY_Q8_0. 32: MOSTLY_BF16. */
const Q4_K_M = 15;

/** Meta-Llama-3.1-8B-Instruct as a Q4_K_M GGUF (bartowski / lmstudio-community conversions). */
export const llama31_8b: [string, GgufValue][] = [
  ['general.architecture', str('llama')],
  ['general.name', str('Meta Llama 3.1 8B Instruct')],
  ['general.size_label', str('8B')],
  ['general.file_type', u32(Q4_K_M)],
  ['llama.block_count', u32(32)], // num_hidden_layers 32
  ['llama.context_length', u32(131072)], // max_position_embeddings 131072
  ['llama.embedding_length', u32(4096)], // hidden_size 4096
  ['llama.feed_forward_length', u32(14336)], // intermediate_size 14336
  ['llama.attention.head_count', u32(32)], // num_attention_heads 32
  ['llama.attention.head_count_kv', u32(8)], // num_key_value_heads 8
  ['llama.rope.freq_base', f32(500000)], // rope_theta 500000
  ['llama.attention.layer_norm_rms_epsilon', f32(1e-5)],
  ['llama.rope.dimension_count', u32(128)], // hidden_size / heads; no key_length: 4096/32 = 128
  ['llama.vocab_size', u32(128256)],
];

/** Qwen2.5-7B-Instruct as Qwen's own Q4_K_M GGUF (the Instruct config: 32768 tokens). */
export const qwen25_7b: [string, GgufValue][] = [
  ['general.architecture', str('qwen2')],
  ['general.name', str('Qwen2.5 7B Instruct')],
  ['general.size_label', str('7.6B')],
  ['general.file_type', u32(Q4_K_M)],
  ['qwen2.block_count', u32(28)], // num_hidden_layers 28
  ['qwen2.context_length', u32(32768)], // Instruct max_position_embeddings 32768 (base: 131072)
  ['qwen2.embedding_length', u32(3584)], // hidden_size 3584
  ['qwen2.feed_forward_length', u32(18944)], // intermediate_size 18944
  ['qwen2.attention.head_count', u32(28)], // num_attention_heads 28
  ['qwen2.attention.head_count_kv', u32(4)], // num_key_value_heads 4
  ['qwen2.rope.freq_base', f32(1000000)], // rope_theta 1e6
  ['qwen2.attention.layer_norm_rms_epsilon', f32(1e-6)],
];

/** gemma-2-9b-it: head_dim 256 (not 3584/16 = 224), so the converter writes key/value_length. */
export const gemma2_9b: [string, GgufValue][] = [
  ['general.architecture', str('gemma2')],
  ['general.name', str('Gemma 2 9b It')],
  ['general.size_label', str('9.2B')],
  ['general.file_type', u32(Q4_K_M)],
  ['gemma2.context_length', u32(8192)], // max_position_embeddings 8192
  ['gemma2.embedding_length', u32(3584)], // hidden_size 3584
  ['gemma2.block_count', u32(42)], // num_hidden_layers 42
  ['gemma2.feed_forward_length', u32(14336)], // intermediate_size 14336
  ['gemma2.attention.head_count', u32(16)], // num_attention_heads 16
  ['gemma2.attention.head_count_kv', u32(8)], // num_key_value_heads 8
  ['gemma2.attention.layer_norm_rms_epsilon', f32(1e-6)],
  ['gemma2.attention.key_length', u32(256)], // head_dim 256
  ['gemma2.attention.value_length', u32(256)], // head_dim 256
  ['gemma2.attn_logit_softcapping', f32(50)], // attn_logit_softcapping 50.0
  ['gemma2.final_logit_softcapping', f32(30)], // final_logit_softcapping 30.0
  ['gemma2.attention.sliding_window', u32(4096)], // sliding_window 4096, on alternate layers
];

/** DeepSeek-V2-Lite(-Chat): MLA, kv_lora_rank 512, qk_rope_head_dim 64 (rope.dimension_count). */
export const deepseekV2Lite: [string, GgufValue][] = [
  ['general.architecture', str('deepseek2')],
  ['general.name', str('DeepSeek V2 Lite Chat')],
  ['general.size_label', str('64x1.5B')],
  ['general.file_type', u32(Q4_K_M)],
  ['deepseek2.block_count', u32(27)], // num_hidden_layers 27
  ['deepseek2.context_length', u32(163840)], // max_position_embeddings 163840 (yarn 40 × 4096)
  ['deepseek2.embedding_length', u32(2048)], // hidden_size 2048
  ['deepseek2.feed_forward_length', u32(10944)], // intermediate_size 10944 (the first, dense layer)
  ['deepseek2.attention.head_count', u32(16)], // num_attention_heads 16
  ['deepseek2.attention.head_count_kv', u32(16)], // num_key_value_heads 16
  ['deepseek2.rope.freq_base', f32(10000)],
  ['deepseek2.attention.layer_norm_rms_epsilon', f32(1e-6)],
  ['deepseek2.attention.key_length', u32(192)], // qk_nope_head_dim 128 + qk_rope_head_dim 64
  ['deepseek2.attention.value_length', u32(128)], // v_head_dim 128
  ['deepseek2.leading_dense_block_count', u32(1)], // first_k_dense_replace 1
  ['deepseek2.vocab_size', u32(102400)],
  ['deepseek2.attention.kv_lora_rank', u32(512)], // kv_lora_rank 512
  ['deepseek2.expert_feed_forward_length', u32(1408)], // moe_intermediate_size 1408
  ['deepseek2.expert_count', u32(64)], // n_routed_experts 64
  ['deepseek2.expert_shared_count', u32(2)], // n_shared_experts 2
  ['deepseek2.expert_used_count', u32(6)], // num_experts_per_tok 6
  ['deepseek2.rope.dimension_count', u32(64)], // qk_rope_head_dim 64
  ['deepseek2.rope.scaling.type', str('yarn')],
  ['deepseek2.rope.scaling.factor', f32(40)],
  ['deepseek2.rope.scaling.original_context_length', u32(4096)],
];

/**
 * A few tiny tensors (real names, small shapes, Q4_K / F32 types, real ggml byte sizes: Q4_K is
 * 144 bytes per 256 elements), and one large F32 tensor so the file is bigger than the 2 MB the
 * reader fetches at a time.
 */
export function tinyTensors(bigBytes = 6 * 1024 * 1024): NonNullable<GgufSpec['tensors']> {
  return [
    { name: 'token_embd.weight', shape: [256, 4], type: 12, bytes: 4 * 144 },
    { name: 'blk.0.attn_norm.weight', shape: [256], type: 0, bytes: 256 * 4 },
    { name: 'output.weight', shape: [bigBytes / 4], type: 0, bytes: bigBytes },
  ];
}

/** config.json of the original weights, as published on the hub (the keys that size a model). */
export const configs = {
  /** meta-llama/Llama-3.1-8B-Instruct; model.safetensors.index.json total_size 16,060,522,496. */
  llama31_8b: {
    json: {
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 4096,
      intermediate_size: 14336,
      max_position_embeddings: 131072,
      num_attention_heads: 32,
      num_hidden_layers: 32,
      num_key_value_heads: 8,
      rope_scaling: {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
        rope_type: 'llama3',
      },
      rope_theta: 500000.0,
      tie_word_embeddings: false,
      torch_dtype: 'bfloat16',
      vocab_size: 128256,
    },
    weightBytes: 16_060_522_496,
  },
  /** Qwen/Qwen2.5-7B-Instruct; total_size 15,231,233,024. sliding_window is off (use_sliding_window false). */
  qwen25_7b: {
    json: {
      architectures: ['Qwen2ForCausalLM'],
      model_type: 'qwen2',
      hidden_size: 3584,
      intermediate_size: 18944,
      max_position_embeddings: 32768,
      max_window_layers: 28,
      num_attention_heads: 28,
      num_hidden_layers: 28,
      num_key_value_heads: 4,
      rope_theta: 1000000.0,
      sliding_window: 131072,
      use_sliding_window: false,
      tie_word_embeddings: false,
      torch_dtype: 'bfloat16',
      vocab_size: 152064,
    },
    weightBytes: 15_231_233_024,
  },
  /** google/gemma-2-9b-it: sliding_window 4096 on alternate layers (transformers: even layers). */
  gemma2_9b: {
    json: {
      architectures: ['Gemma2ForCausalLM'],
      model_type: 'gemma2',
      attn_logit_softcapping: 50.0,
      cache_implementation: 'hybrid',
      final_logit_softcapping: 30.0,
      head_dim: 256,
      hidden_size: 3584,
      intermediate_size: 14336,
      max_position_embeddings: 8192,
      num_attention_heads: 16,
      num_hidden_layers: 42,
      num_key_value_heads: 8,
      query_pre_attn_scalar: 256,
      sliding_window: 4096,
      torch_dtype: 'bfloat16',
      vocab_size: 256000,
    },
    weightBytes: undefined,
  },
  /** deepseek-ai/DeepSeek-V2-Lite: MLA (kv_lora_rank 512 + qk_rope_head_dim 64 = a 576-wide latent). */
  deepseekV2Lite: {
    json: {
      architectures: ['DeepseekV2ForCausalLM'],
      model_type: 'deepseek_v2',
      first_k_dense_replace: 1,
      hidden_size: 2048,
      intermediate_size: 10944,
      kv_lora_rank: 512,
      max_position_embeddings: 163840,
      moe_intermediate_size: 1408,
      n_routed_experts: 64,
      n_shared_experts: 2,
      num_attention_heads: 16,
      num_experts_per_tok: 6,
      num_hidden_layers: 27,
      num_key_value_heads: 16,
      q_lora_rank: null,
      qk_nope_head_dim: 128,
      qk_rope_head_dim: 64,
      rope_scaling: {
        beta_fast: 32,
        beta_slow: 1,
        factor: 40,
        mscale: 0.707,
        mscale_all_dim: 0.707,
        original_max_position_embeddings: 4096,
        type: 'yarn',
      },
      torch_dtype: 'bfloat16',
      v_head_dim: 128,
      vocab_size: 102400,
    },
    weightBytes: undefined,
  },
} as const;
