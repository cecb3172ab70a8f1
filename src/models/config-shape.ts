/**
 * A model's shape from the config.json of its original weights (transformers' keys) and the
 * total size of its safetensors files. Vision-language models nest the text model's keys in
 * `text_config` (also `llm_config`, `thinker_config.text_config`); those are read instead.
 */
import { z } from 'zod';

import {
  HYBRID_ARCHITECTURES,
  kvBytesPerToken,
  known,
  type Known,
  type Mla,
  type ModelShape,
  patternLayers,
  type SlidingWindow,
  unknown,
} from './shape.js';

const positive = z.number().int().positive();

/** The keys that size a model; everything else is let through and ignored. */
const TextConfig = z.looseObject({
  model_type: z.string().optional(),
  architectures: z.array(z.string()).optional(),
  num_hidden_layers: positive.optional(),
  num_attention_heads: positive.optional(),
  num_key_value_heads: positive.nullish(),
  hidden_size: positive.optional(),
  head_dim: positive.nullish(),
  max_position_embeddings: positive.optional(),
  sliding_window: positive.nullish(),
  use_sliding_window: z.boolean().optional(),
  max_window_layers: z.number().int().nonnegative().optional(),
  sliding_window_pattern: positive.optional(),
  layer_types: z.array(z.string()).optional(),
  full_attention_interval: positive.optional(),
  kv_lora_rank: positive.nullish(),
  qk_rope_head_dim: positive.optional(),
  qk_nope_head_dim: positive.optional(),
  v_head_dim: positive.optional(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  quantization_config: z.looseObject({ quant_method: z.string().optional() }).optional(),
});
type TextConfig = z.infer<typeof TextConfig>;

const Nested = z.looseObject({
  text_config: TextConfig.optional(),
  llm_config: TextConfig.optional(),
  thinker_config: z.looseObject({ text_config: TextConfig.optional() }).optional(),
});

/** Bytes per value of transformers' dtypes. */
const DTYPE_BYTES: Record<string, [name: string, bytes: number]> = {
  bfloat16: ['bf16', 2],
  float16: ['f16', 2],
  half: ['f16', 2],
  float32: ['f32', 4],
  float: ['f32', 4],
};

export interface ConfigInput {
  /** config.json, parsed. */
  config: unknown;
  /** The sum of the `*.safetensors` sizes (or the index's `metadata.total_size`). */
  weightBytes?: number | undefined;
  /** From `metadata.total_parameters` of the index, where it has one. */
  parameters?: number | undefined;
}

export class ConfigShapeError extends Error {}

/** The text model's keys: the nested config where there is one, else the top level. */
function textConfig(config: unknown): { text: TextConfig; top: TextConfig } {
  const top = TextConfig.safeParse(config);
  if (!top.success) {
    const issue = top.error.issues[0];
    throw new ConfigShapeError(
      `config.json does not read as a model's config: ${issue === undefined ? 'not an object' : `${issue.path.join('.') || '(top)'}: ${issue.message}`}`,
    );
  }
  const nested = Nested.safeParse(config);
  const inner = nested.success
    ? (nested.data.text_config ?? nested.data.llm_config ?? nested.data.thinker_config?.text_config)
    : undefined;
  return { text: inner ?? top.data, top: top.data };
}

const need = (v: number | null | undefined, key: string): Known<number> =>
  v === undefined || v === null ? unknown(`config.json has no ${key}`) : known(v);

function slidingWindow(c: TextConfig, layers: Known<number>): Known<SlidingWindow | null> {
  const window = c.sliding_window;
  if (window === undefined || window === null || c.use_sliding_window === false) return known(null);
  if (c.layer_types !== undefined) {
    return known({ window, layers: c.layer_types.flatMap((t, i) => (t === 'sliding_attention' ? [i] : [])) });
  }
  if (!layers.known) return unknown(`the sliding window's layers: ${layers.reason}`);
  const period =
    c.sliding_window_pattern ?? { gemma2: 2, gemma3: 6, gemma3_text: 6, cohere2: 4 }[c.model_type ?? ''];
  if (period !== undefined) return known({ window, layers: patternLayers(layers.value, period) });
  if (c.use_sliding_window === true && c.max_window_layers !== undefined) {
    // Qwen2's rule (transformers): layers from max_window_layers on use the window.
    const all = Array.from({ length: layers.value }, (_, i) => i);
    return known({ window, layers: all.filter((i) => i >= (c.max_window_layers ?? 0)) });
  }
  // Mistral-7B-v0.1's kind: every layer.
  return known({ window, layers: Array.from({ length: layers.value }, (_, i) => i) });
}

function hybridReason(c: TextConfig): string | undefined {
  const arch = c.model_type ?? 'this model';
  if (HYBRID_ARCHITECTURES.has(c.model_type ?? ''))
    return `${arch} keeps a recurrent state in some layers, which KV bytes per token do not size`;
  if (
    c.full_attention_interval !== undefined ||
    c.layer_types?.some((t) => t !== 'full_attention' && t !== 'sliding_attention')
  ) {
    return `${arch} mixes attention with other kinds of layers (${c.layer_types?.find((t) => t !== 'full_attention' && t !== 'sliding_attention') ?? 'full_attention_interval'}), which KV bytes per token do not size`;
  }
  return undefined;
}

/** The shape of a model from its config.json. Throws ConfigShapeError where it is not a config at all. */
export function shapeFromConfig(input: ConfigInput): ModelShape {
  const { text: c, top } = textConfig(input.config);
  const layers = need(c.num_hidden_layers, 'num_hidden_layers');
  const heads = need(c.num_attention_heads, 'num_attention_heads');
  // num_key_value_heads absent = num_attention_heads (transformers' default: no GQA).
  const kvHeads =
    c.num_key_value_heads !== undefined && c.num_key_value_heads !== null
      ? known(c.num_key_value_heads)
      : heads;
  const headDim: Known<number> =
    c.head_dim !== undefined && c.head_dim !== null
      ? known(c.head_dim)
      : c.hidden_size !== undefined && heads.known
        ? known(c.hidden_size / heads.value)
        : unknown('config.json has neither head_dim nor hidden_size and num_attention_heads');

  let mla: Known<Mla | null> = known(null);
  let keyHeadDim = headDim;
  let valueHeadDim = headDim;
  if (c.kv_lora_rank !== undefined && c.kv_lora_rank !== null) {
    const rope = need(c.qk_rope_head_dim, 'qk_rope_head_dim');
    mla = rope.known
      ? known({ kvLoraRank: c.kv_lora_rank, qkRopeHeadDim: rope.value })
      : unknown(`MLA's rope size: ${rope.reason}`);
    keyHeadDim =
      c.qk_nope_head_dim !== undefined && rope.known
        ? known(c.qk_nope_head_dim + rope.value)
        : unknown('config.json has no qk_nope_head_dim');
    valueHeadDim = need(c.v_head_dim, 'v_head_dim');
  }

  const dtypeName = c.torch_dtype ?? c.dtype ?? top.torch_dtype ?? top.dtype ?? undefined;
  const dt = dtypeName === undefined ? undefined : DTYPE_BYTES[dtypeName];
  const quant = top.quantization_config?.quant_method ?? c.quantization_config?.quant_method;
  const dtype: Known<string> =
    quant !== undefined
      ? known(dt === undefined ? quant : `${quant} (${dt[0]} activations)`)
      : dt !== undefined
        ? known(dt[0])
        : unknown(
            dtypeName === undefined
              ? 'config.json has no torch_dtype'
              : `torch_dtype ${dtypeName} is not a known type`,
          );
  const elementBytes: Known<number> =
    dt !== undefined
      ? known(dt[1])
      : unknown(
          dtypeName === undefined
            ? 'config.json has no torch_dtype'
            : `torch_dtype ${dtypeName} is not a known type`,
        );

  const sw = slidingWindow(c, layers);
  return {
    from: 'config',
    architecture: c.model_type ?? c.architectures?.[0] ?? top.architectures?.[0] ?? 'unknown',
    layers,
    attentionHeads: heads,
    kvHeads,
    keyHeadDim,
    valueHeadDim,
    slidingWindow: sw,
    mla,
    trainedContext: need(c.max_position_embeddings, 'max_position_embeddings'),
    parameters:
      input.parameters !== undefined
        ? known(input.parameters)
        : unknown('config.json does not give a parameter count'),
    weightBytes:
      input.weightBytes !== undefined && input.weightBytes > 0
        ? known(input.weightBytes)
        : unknown('the sizes of the safetensors files are not known'),
    dtype,
    kv: kvBytesPerToken({
      layers,
      kvHeads,
      keyHeadDim,
      valueHeadDim,
      slidingWindow: sw,
      mla,
      elementBytes,
      notAttention: hybridReason(c),
    }),
  };
}

/**
 * The weights' bytes from a repository's files: the `.safetensors` files at its top level, and
 * `consolidated.safetensors` only where there is nothing else (Mistral ships it beside the
 * sharded files; counting both doubles the model).
 */
export function safetensorsBytes(files: readonly { path: string; size: number }[]): Known<number> {
  const top = files.filter((f) => !f.path.includes('/') && f.path.endsWith('.safetensors'));
  const sharded = top.filter((f) => !f.path.startsWith('consolidated'));
  const chosen = sharded.length > 0 ? sharded : top;
  if (chosen.length === 0) return unknown('the repository has no .safetensors files at its top level');
  return known(chosen.reduce((sum, f) => sum + f.size, 0));
}
