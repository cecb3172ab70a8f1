/**
 * The planner against published figures: engines' own logs first, then gguf-parser's estimates
 * (an estimator, not a measurement, but the one GPUStack runs), each within 10%. Sources are
 * quoted in shared/reference/planner.md §2, §3 and §8; each case cites its own.
 */
import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { configs, llama31_8b, qwen25_7b } from '../../test/fakes/gguf/models.js';
import type { GgufValue } from '../../test/fakes/gguf/writer.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { shapeFromGguf } from '../models/gguf-shape.js';
import type { ModelShape } from '../models/shape.js';
import { planProfile } from '../planner/plan.js';
import type { PlanInput } from '../planner/plan-input.js';
import type { ModelDims, PlanProfile, WeightLayout } from '../planner/types.js';
import { GIB, MIB } from '../planner/units.js';

import { engines } from './registry.js';
import { defaultMemFractionStatic } from './sglang/sglang-budget.js';

/** `actual` within `pct`% of `expected`. */
function near(actual: number, expected: number, pct = 10): void {
  expect(Math.abs(actual - expected) / expected, `${actual} against ${expected}`).toBeLessThanOrEqual(
    pct / 100,
  );
}

const profile = (engine: PlanProfile['engine'], args: string[] = [], tp = 1): PlanProfile => ({
  name: 'p',
  engine,
  tp,
  pp: 1,
  gpus_per_node: tp,
  args,
});
const card = (cls: string, mib: number) => ({ class: cls, memoryBytes: mib * MIB });

// ggml's bytes per value: Q4_K 144 B / 256, Q6_K 210 / 256, Q8_0 34 / 32 (ggml.c type_traits).
const Q4_K = 144 / 256;
const Q6_K = 210 / 256;
const Q8_0 = 34 / 32;

/**
 * A GGUF's tensors by where llama.cpp puts them, for a Llama/Qwen2 layout, quantised as
 * llama.cpp's llama_tensor_get_type does: Q4_K_M is Q4_K but for attn_v and ffn_down on the
 * "more bits" layers (the first and last eighth and every third between), Q6_K, and a Q6_K
 * output; Q8_0 and F16 are uniform. Norms and biases are F32.
 */
function layout(
  d: { layers: number; hidden: number; ffn: number; kvDim: number; vocab: number; bias?: boolean },
  quant: 'Q4_K_M' | 'Q8_0' | 'F16',
): WeightLayout {
  const eighth = Math.floor(d.layers / 8);
  const moreBits = (i: number) => i < eighth || i >= Math.floor((7 * d.layers) / 8) || (i - eighth) % 3 === 2;
  const base = quant === 'Q4_K_M' ? Q4_K : quant === 'Q8_0' ? Q8_0 : 2;
  const layers = Array.from({ length: d.layers }, (_, i) => {
    const more = quant === 'Q4_K_M' && moreBits(i) ? Q6_K : base;
    const q = d.hidden * d.hidden;
    const kv = d.hidden * d.kvDim;
    const mlp = d.hidden * d.ffn;
    const f32 = (2 * d.hidden + (d.bias === true ? d.hidden + 2 * d.kvDim : 0)) * 4;
    return (2 * q + kv + 2 * mlp) * base + (kv + mlp) * more + f32;
  });
  const embd = d.vocab * d.hidden;
  return { layers, input: embd * base, output: embd * (quant === 'Q4_K_M' ? Q6_K : base) + d.hidden * 4 };
}

/** Every layer alike, from a file's total and its embedding and output tensors. */
function evenLayout(total: number, layers: number, input: number, output: number): WeightLayout {
  return { layers: Array<number>(layers).fill((total - input - output) / layers), input, output };
}

function gguf(entries: [string, GgufValue][], context: number): ModelShape {
  const meta = asMetadata(entries);
  const arch = meta['general.architecture'] as string;
  return shapeFromGguf({ metadata: { ...meta, [`${arch}.context_length`]: context } });
}

const llama8bDims: ModelDims = { hidden: 4096, feedForward: 14336, vocab: 128256 };
const llama8b = shapeFromConfig({
  config: configs.llama31_8b.json,
  weightBytes: configs.llama31_8b.weightBytes,
});

describe('vLLM against its logs', () => {
  it('Llama-3.1-8B bf16 on one A100-40GB at 131072 tokens: weights 14.99 GiB, KV pool 19.28 GiB of 157,936 tokens, fits', () => {
    // ilseokoh/vllm-gce README (vLLM 0.15.1, a2-highgpu-1g, --enforce-eager, max_num_batched_tokens 8192):
    // "Model loading took 14.99 GiB", "Available KV cache memory: 19.28 GiB",
    // "GPU KV cache size: 157,936 tokens", "Maximum concurrency for 131,072 tokens per request: 1.20x".
    const plan = planProfile({
      engines,
      shape: llama8b,
      dims: llama8bDims,
      profile: profile('vllm', ['--enforce-eager', '--max-num-batched-tokens', '8192']),
      device: card('a100-40g', 40960),
      context: 131072,
      engineVersion: '0.15.1',
    });
    const c = plan.perCard[0]!;
    expect(plan.fits).toBe(true);
    expect(plan.checked).toBe(true);
    near(c.weights / GIB, 14.99);
    expect(c.kv).toBe(131072 * 128 * 1024); // one full request: 16 GiB
    near(plan.pool!.bytes / GIB, 19.28);
    near(plan.pool!.tokens, 157_936);
    expect(c.budget).toBe(0.9 * 40 * GIB); // 0.9 before v0.21
    expect(c.parts['cudaGraphs']).toBeUndefined();
  });

  it('Llama-3.1-8B on one H100 at 0.92: KV 55.05 GiB', () => {
    // planner.md §8, a write-up of vLLM on 1×H100: requested 72.8 GiB, non-KV 16.51 (weights 14.99,
    // activation peak 1.21), KV 55.05 GiB. Default batching for a ≥70 GiB card: 8192 tokens, 1024 requests.
    const plan = planProfile({
      engines,
      shape: llama8b,
      dims: llama8bDims,
      profile: profile('vllm'),
      device: card('h100-80g', 81559),
      context: 8192,
      engineVersion: '0.21.0',
    });
    expect(plan.fits).toBe(true);
    near(plan.pool!.bytes / GIB, 55.05);
    near(plan.perCard[0]!.parts['activations']! / GIB, 1.21);
    expect(plan.perCard[0]!.budget).toBeCloseTo(0.92 * 81559 * MIB);
  });

  it('Qwen2.5-VL-72B over four A100-40GB at 0.95 does not fit its 128000 tokens', () => {
    // vllm-project/vllm#16570: weights 34.43 GiB a GPU, activation peak 2.51, KV 0.04-0.13 GiB: it fails.
    const shape = shapeFromConfig({
      config: {
        model_type: 'qwen2_5_vl',
        hidden_size: 8192,
        intermediate_size: 29568,
        num_attention_heads: 64,
        num_hidden_layers: 80,
        num_key_value_heads: 8,
        max_position_embeddings: 128000,
        torch_dtype: 'bfloat16',
        vocab_size: 152064,
      },
      weightBytes: 4 * 34.43 * GIB,
    });
    const plan = planProfile({
      engines,
      shape,
      dims: { hidden: 8192, feedForward: 29568, vocab: 152064 },
      profile: profile('vllm', ['--gpu-memory-utilization', '0.95'], 4),
      device: card('a100-40g', 40960),
      context: 128000,
    });
    expect(plan.fits).toBe(false);
    near(plan.perCard[0]!.weights / GIB, 34.43);
    expect(plan.reason).toMatch(
      /^needs 45\.\d GiB a card on a100-40g \(weights 34\.4, KV 9\.8 at 128000 tokens, overhead 1\.\d\), the card gives 38\.0 \(vLLM's 0\.95 of 40\.0\): a context up to \d+ fits, or 8 cards$/,
    );
  });
});

describe('SGLang against its sources', () => {
  it('the default --mem-fraction-static on an H100 at tp 8 is about 0.819', () => {
    // planner.md §3: "H100 TP8 gives ≈0.819" (server_args._handle_gpu_memory_settings).
    expect(defaultMemFractionStatic({ memoryMib: 81920, tp: 8, pp: 1 })).toBe(0.819);
  });

  it('Llama-3.1-8B fp16 weights: 15.11 GiB on an H100 NVL', () => {
    // SGLang log: "Load weight begin. avail mem=92.50 GB" → "Load weight end … avail mem=77.39 GB".
    const plan = planProfile({
      engines,
      shape: llama8b,
      profile: profile('sglang'),
      device: card('h100-94g', 95830),
      context: 8192,
    });
    near(plan.perCard[0]!.weights / GIB, 15.11);
    expect(plan.fits).toBe(true);
  });
});

describe('llama.cpp against its logs', () => {
  const llama3 = gguf(llama31_8b, 8192);
  const llama3Layout = layout({ layers: 32, hidden: 4096, ffn: 14336, kvDim: 1024, vocab: 128256 }, 'Q4_K_M');

  it('Meta-Llama-3-8B Q4_K_M at --ctx-size 8192: model 4403 MiB, KV 1024 MiB, compute 124 MiB', () => {
    // planner.md §8, Metal: "llama_kv_cache: size = 1024.00 MiB (8192 cells, 32 layers, 1/1 seqs)",
    // memory breakdown "self 5551 = model 4403 + context 1024 + compute 124" MiB.
    const plan = planProfile({
      engines,
      shape: llama3,
      layout: llama3Layout,
      dims: llama8bDims,
      profile: profile('llamacpp', ['--ctx-size', '8192', '--parallel', '1']),
      device: card('m2-24g', 24576),
    });
    const c = plan.perCard[0]!;
    expect(plan.fits).toBe(true);
    near(c.weights / MIB, 4403, 1);
    expect(c.kv).toBe(1024 * MIB);
    near(c.parts['compute']! / MIB, 124);
    expect(plan.kvTokens).toBe(8192);
    expect(plan.context).toBe(8192);
    expect(plan.contextFrom).toBe('args');
  });

  it('the same on CPUs, batch 256 without flash attention: compute buffer 280 MiB', () => {
    // planner.md §8: "CPU, 8192 ctx, n_batch 256, FA off: compute buffer 280 MiB".
    const plan = planProfile({
      engines,
      shape: llama3,
      layout: llama3Layout,
      dims: llama8bDims,
      profile: { ...profile('llamacpp', ['-c', '8192', '-np', '1', '-b', '256', '-fa', 'off']), cpu: true },
      device: { cpu: true, ramBytes: 32 * GIB },
    });
    near(plan.perCard[0]!.parts['compute']! / MIB, 280);
    // On CPUs every weight is in RAM, the token embeddings included.
    near(plan.perCard[0]!.weights / MIB, 4403 + 282, 1);
  });
});

describe('llama.cpp against gguf-parser estimates (no flash attention, one slot, "VRAM 0 NonUMA")', () => {
  // gpustack/gguf-parser-go README. Its figure has a 250 MiB platform footprint where the planner
  // keeps a 1 GiB margin, so the planner's total less the margin plus 250 MiB is compared.
  const parser = (total: number, margin: number) => (total - margin + 250 * MIB) / GIB;
  const qwen7 = { layers: 28, hidden: 3584, ffn: 18944, kvDim: 512, vocab: 152064, bias: true };
  const qwenDims: ModelDims = { hidden: 3584, feedForward: 18944, vocab: 152064 };
  const noFa = (ctx: number) => ['-fa', 'off', '-c', String(ctx), '-np', '1'];

  const cases: [string, number, number, Omit<PlanInput, 'profile' | 'device' | 'engines'>][] = [
    [
      'Qwen2.5-7B-Instruct Q8_0',
      131072,
      21.82,
      { shape: gguf(qwen25_7b, 131072), layout: layout(qwen7, 'Q8_0'), dims: qwenDims },
    ],
    [
      'DeepSeek-R1-Distill-Qwen-7B Q4_K_M',
      131072,
      18.89,
      { shape: gguf(qwen25_7b, 131072), layout: layout(qwen7, 'Q4_K_M'), dims: qwenDims },
    ],
    [
      'DeepSeek-R1-Distill-Qwen-7B F16',
      131072,
      27.99,
      { shape: gguf(qwen25_7b, 131072), layout: layout(qwen7, 'F16'), dims: qwenDims },
    ],
    [
      'Qwen2.5-72B-Instruct Q4_K_M (44.15 GiB)',
      32768,
      58.18,
      {
        shape: gguf(qwen72b, 32768),
        layout: evenLayout(44.15 * GIB, 80, 152064 * 8192 * Q4_K, 152064 * 8192 * Q6_K),
        dims: { hidden: 8192, feedForward: 29568, vocab: 152064 },
      },
    ],
    ['Llama-3.3-70B Q4_K_M (39.59 GiB)', 131072, 95.86, llama70b()],
    ['Llama-3.3-70B Q4_K_M (39.59 GiB)', 2048, 40.49, llama70b()],
  ];
  it.each(cases)('%s at %i tokens: %f GiB', (_name, ctx, expected, model) => {
    const plan = planProfile({
      engines,
      ...model,
      profile: profile('llamacpp', noFa(ctx)),
      device: card('h200-141g', 143771),
    });
    const c = plan.perCard[0]!;
    near(parser(c.total, c.parts['margin']!), expected);
  });

  it('Llama-3.1-70B Q4_K_M at 1024 tokens over two cards, --tensor-split 8,10: 17.83 and 22.83 GiB', () => {
    const plan = planProfile({
      engines,
      ...llama70b(),
      profile: { ...profile('llamacpp', [...noFa(1024), '--tensor-split', '8,10']), gpus_per_node: 2 },
      device: card('l40s-48g', 46068),
    });
    expect(plan.perCard).toHaveLength(2);
    near(parser(plan.perCard[0]!.total, plan.perCard[0]!.parts['margin']!), 17.83);
    near(parser(plan.perCard[1]!.total, plan.perCard[1]!.parts['margin']!), 22.83);
  });
});

const qwen72b: [string, GgufValue][] = [
  ...qwen25_7b.filter(([k]) => !/block_count|embedding_length|feed_forward|head_count/.test(k)),
  ['qwen2.block_count', { t: 'u32', v: 80 }],
  ['qwen2.embedding_length', { t: 'u32', v: 8192 }],
  ['qwen2.feed_forward_length', { t: 'u32', v: 29568 }],
  ['qwen2.attention.head_count', { t: 'u32', v: 64 }],
  ['qwen2.attention.head_count_kv', { t: 'u32', v: 8 }],
];

function llama70b(): Omit<PlanInput, 'profile' | 'device' | 'engines'> {
  const entries: [string, GgufValue][] = [
    ...llama31_8b.filter(([k]) => !/block_count|embedding_length|feed_forward|head_count\b/.test(k)),
    ['llama.block_count', { t: 'u32', v: 80 }],
    ['llama.embedding_length', { t: 'u32', v: 8192 }],
    ['llama.feed_forward_length', { t: 'u32', v: 28672 }],
    ['llama.attention.head_count', { t: 'u32', v: 64 }],
  ];
  return {
    shape: gguf(entries, 131072),
    layout: evenLayout(39.59 * GIB, 80, 128256 * 8192 * Q4_K, 128256 * 8192 * Q6_K),
    dims: { hidden: 8192, feedForward: 28672, vocab: 128256 },
  };
}
