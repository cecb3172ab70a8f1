import { type Known, known, type ModelShape, unknown } from '../models/shape.js';

/**
 * KV cache per token on one card, layer by layer, as the engines size it:
 * - attention (MHA/GQA): key_dim × K bytes + value_dim × V bytes, times the KV heads a card
 *   holds, max(1, kv_heads ÷ tp): past tp = kv_heads each card keeps a copy of one head;
 * - MLA (DeepSeek-V2/V3): one latent of kv_lora_rank + qk_rope_head_dim values a layer, not
 *   split by tp (vLLM's MLA page, llama.cpp's MLA cache);
 * - sliding-window layers are marked, for each engine to bound as it does.
 */
export interface KvLayers {
  /** Bytes one token costs on one card, per layer. */
  perLayer: number[];
  /** Per layer, whether it keeps only the last `window` tokens. */
  sliding: boolean[];
  window: number;
}

export interface KvOptions {
  tp: number;
  /** Bytes of a K and of a V value (llama.cpp's q8_0 is 34/32). */
  kBytes: number;
  vBytes: number;
  /** The engine keeps every layer's full context (SGLang on Gemma, llama.cpp --swa-full). */
  slidingAsFull?: boolean;
}

export function kvLayers(shape: ModelShape, options: KvOptions): Known<KvLayers> & { notes: string[] } {
  const notes: string[] = [];
  // The shape's own KV figure says where the shape could not size KV at all (hybrid layers,
  // unknown heads or dims); that reason is the one to give. Its dtype alone does not matter
  // here: the engine's cache type (`options`) sizes the values, 16 bits unless told otherwise.
  if (!shape.kv.known) {
    if (!/torch_dtype/.test(shape.kv.reason)) return { ...unknown(shape.kv.reason), notes };
    notes.push(
      `the model's dtype is not known (${shape.kv.reason}): its KV cache is counted at the engine's own type`,
    );
  }
  if (!shape.layers.known) return { ...unknown(shape.layers.reason), notes };
  if (!shape.mla.known) return { ...unknown(shape.mla.reason), notes };
  const layers = shape.layers.value;
  const perLayer: number[] = [];
  const mla = shape.mla.value;
  if (mla !== null) {
    const bytes = (mla.kvLoraRank + mla.qkRopeHeadDim) * options.kBytes;
    for (let i = 0; i < layers; i++) perLayer.push(bytes);
  } else {
    const { keyHeadDim, valueHeadDim, kvHeads } = shape;
    if (!keyHeadDim.known) return { ...unknown(keyHeadDim.reason), notes };
    if (!valueHeadDim.known) return { ...unknown(valueHeadDim.reason), notes };
    if (!kvHeads.known && shape.kvHeadsPerLayer === undefined) return { ...unknown(kvHeads.reason), notes };
    for (let i = 0; i < layers; i++) {
      const heads = shape.kvHeadsPerLayer?.[i] ?? (kvHeads.known ? kvHeads.value : 0);
      // A layer without KV heads (some per-layer arrays have 0s) holds no cache.
      const onCard = heads === 0 ? 0 : Math.max(1, Math.floor(heads / options.tp));
      perLayer.push(onCard * (keyHeadDim.value * options.kBytes + valueHeadDim.value * options.vBytes));
    }
  }
  const sliding = perLayer.map(() => false);
  let window = 0;
  if (!shape.slidingWindow.known) {
    notes.push(
      `which layers use a sliding window is not known (${shape.slidingWindow.reason}): all are counted in full`,
    );
  } else if (shape.slidingWindow.value !== null && options.slidingAsFull !== true) {
    window = shape.slidingWindow.value.window;
    for (const i of shape.slidingWindow.value.layers) if (i < layers) sliding[i] = true;
  }
  return { ...known({ perLayer, sliding, window }), notes };
}

/** Bytes of `tokens` tokens on the layers `from` to `to` (exclusive), a sliding layer holding at most `swaTokens`. */
export function kvBytes(
  kv: KvLayers,
  range: { from: number; to: number; tokens: number; swaTokens: number },
): number {
  let sum = 0;
  for (let i = range.from; i < range.to; i++) {
    sum +=
      (kv.perLayer[i] ?? 0) *
      (kv.sliding[i] === true ? Math.min(range.tokens, range.swaTokens) : range.tokens);
  }
  return sum;
}

/** Bytes a token costs on every layer of a range, sliding ones included: what a pool's token count divides by. */
export function kvPerToken(kv: KvLayers, from = 0, to = kv.perLayer.length): number {
  let sum = 0;
  for (let i = from; i < to; i++) sum += kv.perLayer[i] ?? 0;
  return sum;
}

/**
 * vLLM's and SGLang's `--kv-cache-dtype`: `auto` is the model's compute dtype, which both run at
 * 16 bits unless told `--dtype float32`, and the fp8 kinds one byte.
 */
export function kvCacheDtypeBytes(value: string | undefined, modelBytes: number): number | undefined {
  if (value === undefined || value === 'auto') return modelBytes;
  if (value.startsWith('fp8')) return 1;
  if (value === 'bfloat16' || value === 'bf16' || value === 'float16' || value === 'half') return 2;
  return undefined;
}
