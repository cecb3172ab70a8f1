/**
 * A model's shape from its GGUF header: the key/values `@huggingface/gguf` returns (numbers,
 * bigints for u64/i64, strings, arrays) and, optionally, its tensor infos. Key names are
 * llama.cpp's (gguf-py constants.py), prefixed by `general.architecture`.
 */
import { GGMLFileQuantizationType, GGMLQuantizationType } from '@huggingface/gguf';

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

export interface GgufHeader {
  metadata: Readonly<Record<string, unknown>>;
  tensorInfos?: readonly { shape: readonly bigint[]; dtype: number }[];
}

/** llama.cpp's KV cache type unless told otherwise (`--cache-type-k/v f16`). */
const KV_CACHE_BYTES = 2;

/** Bytes per block and elements per block of ggml's tensor types (ggml.c type_traits). */
const GGML_SIZES: Record<number, [bytes: number, elements: number]> = {
  0: [4, 1], // F32
  1: [2, 1], // F16
  2: [18, 32], // Q4_0
  3: [20, 32], // Q4_1
  6: [22, 32], // Q5_0
  7: [24, 32], // Q5_1
  8: [34, 32], // Q8_0
  9: [36, 32], // Q8_1
  10: [84, 256], // Q2_K
  11: [110, 256], // Q3_K
  12: [144, 256], // Q4_K
  13: [176, 256], // Q5_K
  14: [210, 256], // Q6_K
  15: [292, 256], // Q8_K
  16: [66, 256], // IQ2_XXS
  17: [74, 256], // IQ2_XS
  18: [98, 256], // IQ3_XXS
  19: [50, 256], // IQ1_S
  20: [18, 32], // IQ4_NL
  21: [110, 256], // IQ3_S
  22: [82, 256], // IQ2_S
  23: [136, 256], // IQ4_XS
  24: [1, 1], // I8
  25: [2, 1], // I16
  26: [4, 1], // I32
  27: [8, 1], // I64
  28: [8, 1], // F64
  29: [56, 256], // IQ1_M
  30: [2, 1], // BF16
  34: [54, 256], // TQ1_0
  35: [66, 256], // TQ2_0
  39: [17, 32], // MXFP4
};

function num(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'bigint' && v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= 0n) return Number(v);
  return undefined;
}

function numArray(v: unknown): number[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: number[] = [];
  for (const item of v) {
    const n = num(item);
    if (n === undefined) return undefined;
    out.push(n);
  }
  return out;
}

/** A positive whole number under `key`, else why not. */
function count(meta: GgufHeader['metadata'], key: string): Known<number> {
  const v = meta[key];
  if (v === undefined) return unknown(`${key} is not in the header`);
  const n = num(v);
  if (n === undefined || !Number.isInteger(n) || n <= 0)
    return unknown(
      `${key} is ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x))}, not a positive count`,
    );
  return known(n);
}

/** `8B`, `7.6B`, `500M`: a label's count; a MoE label (`64x1.5B`) is not a total. */
function fromSizeLabel(label: unknown): Known<number> {
  const m = typeof label === 'string' ? /^(\d+(?:\.\d+)?)([KMBT])$/i.exec(label.trim()) : null;
  const unit = m?.[2]?.toUpperCase();
  if (m === null || (unit !== 'K' && unit !== 'M' && unit !== 'B' && unit !== 'T')) {
    return unknown(
      `no tensor infos, and general.size_label (${typeof label === 'string' ? label : 'absent'}) is not a plain count`,
    );
  }
  const scale = { K: 1e3, M: 1e6, B: 1e9, T: 1e12 }[unit];
  return known(Math.round(Number(m[1]) * scale));
}

function weights(header: GgufHeader): { parameters: Known<number>; weightBytes: Known<number> } {
  const infos = header.tensorInfos;
  if (infos === undefined || infos.length === 0) {
    return {
      parameters: fromSizeLabel(header.metadata['general.size_label']),
      weightBytes: unknown('the header was read without its tensor infos'),
    };
  }
  let parameters = 0;
  let bytes = 0;
  let unsized: string | undefined;
  for (const t of infos) {
    const elements = t.shape.reduce((a, d) => a * Number(d), 1);
    parameters += elements;
    const size = GGML_SIZES[t.dtype];
    if (size === undefined) unsized ??= GGMLQuantizationType[t.dtype] ?? `ggml type ${t.dtype}`;
    else bytes += Math.ceil(elements / size[1]) * size[0];
  }
  return {
    parameters: known(parameters),
    weightBytes:
      unsized === undefined ? known(bytes) : unknown(`the size of ${unsized} tensors is not known`),
  };
}

function quantization(header: GgufHeader): Known<string> {
  const fileType = num(header.metadata['general.file_type']);
  if (fileType !== undefined) {
    const name = GGMLFileQuantizationType[fileType];
    if (name !== undefined) return known(name);
  }
  // Without a file type, the type most tensors have.
  const counts = new Map<number, number>();
  for (const t of header.tensorInfos ?? []) counts.set(t.dtype, (counts.get(t.dtype) ?? 0) + 1);
  const top = [...counts].sort((a, b) => b[1] - a[1])[0];
  const name = top === undefined ? undefined : GGMLQuantizationType[top[0]];
  return name === undefined ? unknown('general.file_type is missing or not a known type') : known(name);
}

/** The sliding window and its layers: gemma2 every 2nd layer full, gemma3 every 6th (llama.cpp's patterns). */
function slidingWindow(
  meta: GgufHeader['metadata'],
  a: string,
  layers: Known<number>,
): Known<SlidingWindow | null> {
  // llama.cpp gives gemma2 a 4096 window where early conversions did not write one.
  const window = num(meta[`${a}.attention.sliding_window`]) ?? (a === 'gemma2' ? 4096 : undefined);
  if (window === undefined || window <= 0) return known(null);
  if (!layers.known) return unknown(`the sliding window's layers: ${layers.reason}`);
  const pattern = meta[`${a}.attention.sliding_window_pattern`];
  if (Array.isArray(pattern)) {
    // Per layer, true where the layer uses the window (gemma3n, gemma4).
    return known({ window, layers: pattern.flatMap((on, i) => (on === true ? [i] : [])) });
  }
  const period = num(pattern) ?? { gemma2: 2, gemma3: 6, cohere2: 4 }[a];
  if (period !== undefined) return known({ window, layers: patternLayers(layers.value, period) });
  if (a === 'phi3') return known(null); // llama.cpp turns phi3's window off
  return unknown(`${a}.attention.sliding_window is ${window}, and which layers use it is not known for ${a}`);
}

/** The shape of a model from its GGUF header. */
export function shapeFromGguf(header: GgufHeader): ModelShape {
  const meta = header.metadata;
  const arch = meta['general.architecture'];
  const a = typeof arch === 'string' ? arch : '';
  const missingArch = unknown<number>('general.architecture is not in the header');
  const k = (key: string): Known<number> => (a === '' ? missingArch : count(meta, `${a}.${key}`));

  const layers = k('block_count');
  const heads = a === '' ? missingArch : perLayerOrScalar(meta, `${a}.attention.head_count`);
  const kvRaw = meta[`${a}.attention.head_count_kv`];
  const kvArr = numArray(kvRaw);
  const kvHeads: Known<number> =
    kvArr !== undefined
      ? kvArr.length > 0
        ? known(Math.max(...kvArr))
        : unknown(`${a}.attention.head_count_kv is an empty array`)
      : kvRaw === undefined
        ? heads.known
          ? known(heads.value) // absent = head_count (llama.cpp)
          : unknown(`${a}.attention.head_count_kv and head_count are not in the header`)
        : k('attention.head_count_kv');

  // key/value_length absent = embedding_length / head_count (llama.cpp).
  const embd = k('embedding_length');
  const derived: Known<number> =
    embd.known && heads.known
      ? known(embd.value / heads.value)
      : unknown(
          `${a}.attention.key_length is absent, and embedding_length / head_count cannot be worked out`,
        );
  // Newer MLA conversions write the latent as key/value_length (576/512) and the heads' sizes as
  // key/value_length_mla (192/128); older ones only the heads' sizes. Both give the heads here.
  const mlaKeys =
    meta[`${a}.attention.key_length_mla`] !== undefined &&
    meta[`${a}.attention.value_length_mla`] !== undefined;
  const keyKey = mlaKeys ? 'attention.key_length_mla' : 'attention.key_length';
  const valueKey = mlaKeys ? 'attention.value_length_mla' : 'attention.value_length';
  const keyHeadDim = meta[`${a}.${keyKey}`] === undefined ? derived : k(keyKey);
  const valueHeadDim = meta[`${a}.${valueKey}`] === undefined ? derived : k(valueKey);

  const rank = num(meta[`${a}.attention.kv_lora_rank`]);
  let mla: Known<Mla | null> = known(null);
  if (rank !== undefined && rank > 0) {
    const rope = k('rope.dimension_count');
    mla = rope.known
      ? known({ kvLoraRank: rank, qkRopeHeadDim: rope.value })
      : unknown(`MLA's rope size: ${rope.reason}`);
  }

  const hybrid =
    HYBRID_ARCHITECTURES.has(a) ||
    Object.keys(meta).some((key) => key.startsWith(`${a}.ssm.`) || key.startsWith(`${a}.wkv.`))
      ? `${a === '' ? 'this model' : a} keeps a recurrent state in some layers, which KV bytes per token do not size`
      : undefined;
  const sw = slidingWindow(meta, a, layers);
  const { parameters, weightBytes } = weights(header);
  return {
    from: 'gguf',
    architecture: a === '' ? 'unknown' : a,
    layers,
    attentionHeads: heads,
    kvHeads,
    ...(kvArr !== undefined && new Set(kvArr).size > 1 ? { kvHeadsPerLayer: kvArr } : {}),
    keyHeadDim,
    valueHeadDim,
    slidingWindow: sw,
    mla,
    trainedContext: k('context_length'),
    parameters,
    weightBytes,
    dtype: quantization(header),
    kv: kvBytesPerToken({
      layers,
      kvHeads,
      kvHeadsPerLayer: kvArr !== undefined && kvArr.length > 1 ? kvArr : undefined,
      keyHeadDim,
      valueHeadDim,
      slidingWindow: sw,
      mla,
      elementBytes: known(KV_CACHE_BYTES),
      notAttention: a === '' ? 'general.architecture is not in the header' : hybrid,
    }),
  };
}

/** A head count stored as a scalar or as one per layer (the largest of them). */
function perLayerOrScalar(meta: GgufHeader['metadata'], key: string): Known<number> {
  const arr = numArray(meta[key]);
  if (arr !== undefined)
    return arr.length > 0 ? known(Math.max(...arr)) : unknown(`${key} is an empty array`);
  return count(meta, key);
}
