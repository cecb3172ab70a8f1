import { z } from 'zod';

/**
 * A model's shape: what sizes its memory, read from a GGUF header (gguf-shape.ts) or from the
 * config.json of its original weights (config-shape.ts). A figure that cannot be read is
 * `unknown` with the reason, never 0: the planner must say it could not check, not plan for 0.
 */

/** A figure, or why it is not known. */
export type Known<T> = { known: true; value: T } | { known: false; reason: string };

export const known = <T>(value: T): Known<T> => ({ known: true, value });
export const unknown = <T = never>(reason: string): Known<T> => ({ known: false, reason });

/** Sliding-window attention: the window and the layers (0-based) that use it. */
export interface SlidingWindow {
  window: number;
  layers: number[];
}

/** Multi-head latent attention (DeepSeek-V2/V3): one latent per token and layer, shared by all heads. */
export interface Mla {
  kvLoraRank: number;
  qkRopeHeadDim: number;
}

/**
 * KV cache bytes per token at `elementBytes` a value (the model's dtype; llama.cpp's default f16
 * for a GGUF), split by layer kind because a sliding-window layer holds at most about `window`
 * tokens: for a context of C tokens the cache is
 *   fullPerToken × C + slidingPerToken × min(C, window + batch).
 * `perToken` is both together, what every token costs while C ≤ window.
 */
export interface KvBytes {
  elementBytes: number;
  perToken: number;
  fullPerToken: number;
  slidingPerToken: number;
}

export interface ModelShape {
  /** Where it was read from. */
  from: 'gguf' | 'config';
  /** `general.architecture` of a GGUF, `model_type` of a config.json. */
  architecture: string;
  layers: Known<number>;
  attentionHeads: Known<number>;
  /** The largest KV head count of any layer; `kvHeadsPerLayer` when they differ. */
  kvHeads: Known<number>;
  kvHeadsPerLayer?: number[];
  keyHeadDim: Known<number>;
  valueHeadDim: Known<number>;
  /** null: no layer uses a sliding window. */
  slidingWindow: Known<SlidingWindow | null>;
  /** null: not MLA. */
  mla: Known<Mla | null>;
  trainedContext: Known<number>;
  parameters: Known<number>;
  weightBytes: Known<number>;
  /** `bf16`, `f16`, `f32` for original weights; a GGUF's file type such as `Q4_K_M`. */
  dtype: Known<string>;
  kv: Known<KvBytes>;
}

interface KvInput {
  layers: Known<number>;
  kvHeads: Known<number>;
  kvHeadsPerLayer?: number[] | undefined;
  keyHeadDim: Known<number>;
  valueHeadDim: Known<number>;
  slidingWindow: Known<SlidingWindow | null>;
  mla: Known<Mla | null>;
  elementBytes: Known<number>;
  /** Set for hybrid or recurrent architectures, whose state is not a per-token KV cache. */
  notAttention?: string | undefined;
}

/**
 * KV bytes per token. Per layer:
 * - attention (MHA/GQA): 2 (K and V) × kv_heads × head_dim × bytes, i.e. (key_dim + value_dim) ×
 *   kv_heads × bytes where K and V heads differ in size;
 * - MLA: (kv_lora_rank + qk_rope_head_dim) × bytes, one latent, no ×2, no per-head factor.
 * Summed over layers, sliding-window layers apart (they cap at the window).
 */
export function kvBytesPerToken(input: KvInput): Known<KvBytes> {
  if (input.notAttention !== undefined) return unknown(input.notAttention);
  const { layers, elementBytes, mla, slidingWindow } = input;
  if (!layers.known) return unknown(layers.reason);
  if (!elementBytes.known) return unknown(elementBytes.reason);
  if (!mla.known) return unknown(mla.reason);
  const swaLayers = new Set(
    slidingWindow.known && slidingWindow.value !== null ? slidingWindow.value.layers : [],
  );
  const perLayer: number[] = [];
  if (mla.value !== null) {
    const bytes = (mla.value.kvLoraRank + mla.value.qkRopeHeadDim) * elementBytes.value;
    for (let i = 0; i < layers.value; i++) perLayer.push(bytes);
  } else {
    const { kvHeads, keyHeadDim, valueHeadDim } = input;
    if (!keyHeadDim.known) return unknown(keyHeadDim.reason);
    if (!valueHeadDim.known) return unknown(valueHeadDim.reason);
    const heads = input.kvHeadsPerLayer;
    if (heads === undefined && !kvHeads.known) return unknown(kvHeads.reason);
    if (heads !== undefined && heads.length !== layers.value) {
      return unknown(`${heads.length} KV head counts given for ${layers.value} layers`);
    }
    for (let i = 0; i < layers.value; i++) {
      const h = heads?.[i] ?? (kvHeads.known ? kvHeads.value : 0);
      perLayer.push((keyHeadDim.value + valueHeadDim.value) * h * elementBytes.value);
    }
  }
  let full = 0;
  let sliding = 0;
  perLayer.forEach((bytes, i) => {
    if (swaLayers.has(i)) sliding += bytes;
    else full += bytes;
  });
  return known({
    elementBytes: elementBytes.value,
    perToken: full + sliding,
    fullPerToken: full,
    slidingPerToken: sliding,
  });
}

/**
 * Which layers use the sliding window for an architecture with a fixed pattern of period n:
 * llama.cpp's `il % n < n - 1` (gemma2: n 2, even layers; gemma3: n 6), the same layers as
 * transformers (Gemma 2: `not layer_idx % 2`).
 */
export function patternLayers(layers: number, period: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < layers; i++) if (i % period < period - 1) out.push(i);
  return out;
}

/** Architectures whose layers keep a recurrent state (Mamba, RWKV, linear attention): not sized by KV per token. */
export const HYBRID_ARCHITECTURES = new Set([
  'mamba',
  'mamba2',
  'rwkv',
  'rwkv6',
  'rwkv6qwen2',
  'rwkv7',
  'arwkv7',
  'jamba',
  'falcon-h1',
  'falcon_h1',
  'granitehybrid',
  'granitemoehybrid',
  'qwen3next',
  'qwen3_next',
  'lfm2',
  'nemotron_h',
  'plamo2',
  'zamba2',
]);

const knownOf = <T extends z.ZodType>(value: T) =>
  z.discriminatedUnion('known', [
    z.object({ known: z.literal(true), value }),
    z.object({ known: z.literal(false), reason: z.string().min(1) }),
  ]);
const count = z.number().int().nonnegative();

/** A stored or received shape, checked once where it comes in (the store, the API). */
export const ModelShapeSchema = z.object({
  from: z.enum(['gguf', 'config']),
  architecture: z.string(),
  layers: knownOf(count),
  attentionHeads: knownOf(count),
  kvHeads: knownOf(count),
  kvHeadsPerLayer: z.array(count).optional(),
  keyHeadDim: knownOf(count),
  valueHeadDim: knownOf(count),
  slidingWindow: knownOf(z.object({ window: count, layers: z.array(count) }).nullable()),
  mla: knownOf(z.object({ kvLoraRank: count, qkRopeHeadDim: count }).nullable()),
  trainedContext: knownOf(count),
  parameters: knownOf(count),
  weightBytes: knownOf(count),
  dtype: knownOf(z.string()),
  kv: knownOf(
    z.object({
      elementBytes: z.number().positive(),
      perToken: count,
      fullPerToken: count,
      slidingPerToken: count,
    }),
  ),
}) satisfies z.ZodType<ModelShape>;
