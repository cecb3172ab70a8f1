import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { engines } from '../../test/support/engines.js';
import { configs, gemma2_9b, llama31_8b } from '../../test/fakes/gguf/models.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { shapeFromGguf } from '../models/gguf-shape.js';
import { known, type ModelShape } from '../models/shape.js';
import { classMemoryBytes } from './class-memory.js';
import { fewestCards, planProfile } from './plan.js';
import type { PlanInput } from './plan-input.js';
import type { PlanProfile } from './types.js';
import { GIB, MIB } from './units.js';
import { layoutFromTensors, weightBytes } from './weights.js';

const llama8b = shapeFromConfig({
  config: configs.llama31_8b.json,
  weightBytes: configs.llama31_8b.weightBytes,
});
/** Llama-3.1-8B as a Q4_K_M GGUF whose tensor infos gave 4.58 GiB. */
const llamaGguf: ModelShape = {
  ...shapeFromGguf({ metadata: asMetadata(llama31_8b) }),
  weightBytes: known(4.58 * GIB),
};
const dims = { hidden: 4096, feedForward: 14336, vocab: 128256 };
const prof = (
  engine: PlanProfile['engine'],
  args: string[] = [],
  more: Partial<PlanProfile> = {},
): PlanProfile => ({
  name: 'p',
  engine,
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  args,
  ...more,
});
const l4 = { class: 'l4-24g', memoryBytes: 23034 * MIB };
const h100 = { class: 'h100-80g', memoryBytes: 81559 * MIB };
const mig = { class: 'a100-80g-mig-3g.40gb', memoryBytes: 40448 * MIB };

describe('planProfile: what is refused, and why, in words a user acts on', () => {
  const refusals: [string, Omit<PlanInput, 'engines'>, string][] = [
    [
      'an engine other than llama.cpp on CPUs',
      { shape: llama8b, profile: prof('vllm'), device: { cpu: true, ramBytes: 64 * GIB } },
      'vLLM does not run on CPUs: a CPU profile needs engine llamacpp and a GGUF file',
    ],
    [
      'more than one MIG instance (seed 000: one instance or nothing)',
      { shape: llama8b, profile: prof('vllm', [], { tp: 2, gpus_per_node: 2 }), device: mig },
      'a100-80g-mig-3g.40gb is a MIG instance: a replica runs on exactly one (a process opens one MIG device, and instances share no NVLink), so 2 of them cannot hold one replica: use 1, or whole cards of a100-80g',
    ],
    [
      'a GGUF file on vLLM',
      { shape: llamaGguf, profile: prof('vllm'), device: l4 },
      "vLLM does not run GGUF files here: use engine llamacpp for them, or vLLM on the model's original weights",
    ],
    [
      'tensor parallel that does not split the heads',
      { shape: llama8b, profile: prof('sglang', [], { tp: 3, gpus_per_node: 3 }), device: l4 },
      'Total number of attention heads (32) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4, 8, 16.',
    ],
    [
      'a --gpu-memory-utilization vLLM would not take',
      { shape: llama8b, profile: prof('vllm', ['--gpu-memory-utilization', '1.5']), device: l4 },
      'the profile\'s --gpu-memory-utilization is "1.5", not a fraction above 0 and at most 1: the engine would not start with it',
    ],
    [
      'a --mem-fraction-static given no value',
      { shape: llama8b, profile: prof('sglang', ['--mem-fraction-static']), device: l4 },
      "the profile's --mem-fraction-static is given no value, not a fraction between 0 and 1: the engine would not start with it",
    ],
    [
      'a --max-model-len that is no number',
      { shape: llama8b, profile: prof('vllm', ['--max-model-len', '32x']), device: l4 },
      'the profile\'s --max-model-len is "32x", not a number of tokens (or auto): vLLM would not start with it',
    ],
    [
      'a --kv-cache-dtype vLLM does not have',
      { shape: llama8b, profile: prof('vllm', ['--kv-cache-dtype=int4']), device: l4 },
      "the profile's --kv-cache-dtype int4 is not one vLLM takes (auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2)",
    ],
    [
      'a llama.cpp cache type it does not have',
      { shape: llamaGguf, profile: prof('llamacpp', ['--cache-type-k', 'q3_k']), device: l4 },
      "the profile's --cache-type-k q3_k is not a cache type llama.cpp takes (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)",
    ],
    [
      'a quantized V cache without flash attention',
      { shape: llamaGguf, profile: prof('llamacpp', ['-fa', 'off', '-ctv', 'q8_0']), device: l4 },
      "quantized V cache was requested, but this requires Flash Attention (llama.cpp's words): drop --flash-attn off, or --cache-type-v q8_0",
    ],
    [
      'a --tensor-split that is no proportions',
      { shape: llamaGguf, profile: prof('llamacpp', ['-ts', 'a,b'], { gpus_per_node: 2 }), device: l4 },
      'the profile\'s --tensor-split is "a,b", not proportions such as 3,1: llama.cpp would not start with it',
    ],
    [
      'a context past the trained one on vLLM',
      { shape: llama8b, profile: prof('vllm'), device: h100, context: 262144 },
      'a context of 262144 tokens is more than the 131072 the model was trained for, which vLLM refuses ("User-specified max_model_len (262144) is greater than the derived max_model_len"): 131072 tokens or fewer',
    ],
    [
      'a context past the trained one on SGLang',
      { shape: llama8b, profile: prof('sglang'), device: h100, context: 262144 },
      'a context of 262144 tokens is more than the 131072 the model was trained for, which SGLang refuses ("User-specified context_length (262144) is greater than the derived context_length (131072)"): 131072 tokens or fewer',
    ],
    [
      'a context the card cannot hold on vLLM: a shorter one or more cards',
      { shape: llama8b, dims, profile: prof('vllm'), device: l4, context: 131072, engineVersion: '0.21.0' },
      "needs 32.7 GiB a card on l4-24g (weights 15.0, KV 16.0 at 131072 tokens, overhead 1.7), the card gives 20.7 (vLLM's 0.92 of 22.5): a context up to 33024 fits, or 2 cards",
    ],
    [
      'the same on SGLang, by its own fraction',
      { shape: llama8b, dims, profile: prof('sglang'), device: l4, context: 131072 },
      "needs 32.0 GiB a card on l4-24g (weights 15.0, KV 16.0 at 131072 tokens, overhead 1.0), the card gives 18.8 (SGLang's --mem-fraction-static 0.837 of 22.5): a context up to 23296 fits, or 2 cards",
    ],
    [
      'the same on TensorRT-LLM, by its fraction of what is free',
      { shape: llama8b, dims, profile: prof('trtllm'), device: l4, context: 131072 },
      "needs 33.6 GiB a card on l4-24g (weights 15.0, KV 16.0 at 131072 tokens, overhead 2.7), the card gives 22.0 (TensorRT-LLM's KV cache takes 0.9 of what is free after the weights): a context up to 35840 fits, or 2 cards",
    ],
    [
      'weights no context fits beside',
      {
        shape: { ...llama8b, weightBytes: known(141e9) },
        dims,
        profile: prof('vllm'),
        device: l4,
        context: 8192,
        engineVersion: '0.21.0',
      },
      "needs 134.0 GiB a card on l4-24g (weights 131.3, KV 1.0 at 8192 tokens, overhead 1.7), the card gives 20.7 (vLLM's 0.92 of 22.5): no context fits beside the weights: 8 cards",
    ],
    [
      'weights no context fits beside, and no count of cards tried',
      {
        shape: { ...llama8b, weightBytes: known(141e9) },
        dims,
        profile: prof('vllm'),
        device: l4,
        context: 8192,
        engineVersion: '0.21.0',
        maxCards: 2,
      },
      "needs 134.0 GiB a card on l4-24g (weights 131.3, KV 1.0 at 8192 tokens, overhead 1.7), the card gives 20.7 (vLLM's 0.92 of 22.5): no context fits beside the weights: more cards, or a class with more memory",
    ],
    [
      "a CPU profile beyond the node's RAM: the pool is the context times the slots",
      {
        shape: llamaGguf,
        dims,
        profile: prof('llamacpp', [], { cpu: true, gpus_per_node: 0 }),
        device: { cpu: true, ramBytes: 8 * GIB },
        context: 8192,
      },
      'needs 9.7 GiB of RAM (weights 4.6, KV 4.0 at 32768 tokens (4 slots of 8192), overhead 1.1), the node has 8.0: a context up to 4608 fits with 4 slots',
    ],
    [
      'llama.cpp over two cards, the fuller one named',
      {
        shape: llamaGguf,
        dims,
        profile: prof('llamacpp', ['-np', '2'], { gpus_per_node: 2 }),
        device: { class: 't4-16g', memoryBytes: 15360 * MIB },
        context: 131072,
      },
      'needs 21.5 GiB on card 1 of 2 on t4-16g (weights 2.4, KV 17.0 at 262144 tokens (2 slots of 131072), overhead 2.1), the card gives 15.0: a context up to 83200 fits with 2 slots, or 3 cards',
    ],
  ];
  it.each(refusals)('%s', (_name, input, reason) => {
    const plan = planProfile({ engines, ...input });
    expect(plan.fits).toBe(false);
    expect(plan.reason).toBe(reason);
  });
});

describe('planProfile: what fits', () => {
  it('one MIG instance holds Llama-3.1-8B at its full context, as on a whole A100-40GB', () => {
    const plan = planProfile({
      engines,
      shape: llama8b,
      dims,
      profile: prof('vllm', ['--enforce-eager', '--max-num-batched-tokens', '8192']),
      device: mig,
      context: 131072,
      engineVersion: '0.15.1',
    });
    expect(plan).toMatchObject({ fits: true, checked: true, cards: 1, maxContext: 131072 });
    expect(plan.reason).toBeUndefined();
  });

  it("takes the context from the profile's args first, as the engine does, then the model's, then the trained one", () => {
    const args = planProfile({
      engines,
      shape: llama8b,
      profile: prof('vllm', ['--max-model-len', '32k']),
      device: l4,
      context: 131072,
    });
    expect(args).toMatchObject({ context: 32000, contextFrom: 'args', fits: true });
    const given = planProfile({
      engines,
      shape: llama8b,
      profile: prof('vllm'),
      device: h100,
      context: 8192,
    });
    expect(given).toMatchObject({ context: 8192, contextFrom: 'input' });
    const trained = planProfile({ engines, shape: llama8b, profile: prof('vllm'), device: h100 });
    expect(trained).toMatchObject({ context: 131072, contextFrom: 'trained', maxContext: 131072 });
  });

  it("sizes llama.cpp's pool as tokens × slots: the profile's --parallel, else the caller's, else 4", () => {
    const at = (args: string[], slots?: number) =>
      planProfile({
        engines,
        shape: llamaGguf,
        profile: prof('llamacpp', args),
        device: l4,
        context: 8192,
        slots,
      });
    expect(at([])).toMatchObject({ slots: 4, kvTokens: 32768 });
    expect(at([], 8)).toMatchObject({ slots: 8, kvTokens: 65536 });
    expect(at(['--parallel', '2'], 8)).toMatchObject({ slots: 2, kvTokens: 16384 });
    // -np -1: automatic slots sharing one pool, which llmgw sizes to one context.
    expect(at(['-np', '-1'])).toMatchObject({ slots: 1, kvTokens: 8192 });
    // --ctx-size wins, and is padded to 256 cells as llama.cpp pads it.
    expect(at(['-c', '10000', '-np', '1'])).toMatchObject({
      context: 10000,
      contextFrom: 'args',
      kvTokens: 10240,
    });
    expect(at(['-np', '1']).perCard[0]!.kv).toBe(8192 * 128 * 1024);
  });

  it("bounds llama.cpp's sliding-window layers: Gemma 2 at 8192 tokens", () => {
    const gemma = { ...shapeFromGguf({ metadata: asMetadata(gemma2_9b) }), weightBytes: known(5.4 * GIB) };
    const plan = planProfile({ engines, shape: gemma, profile: prof('llamacpp', ['-np', '1']), device: l4 });
    // 21 full layers × 8 heads × 512 × 2 B × 8192 + 21 sliding ones × … × (4096 + 512 batch).
    expect(plan.perCard[0]!.kv).toBe(21 * 8192 * 8192 + 21 * 8192 * 4608);
  });

  it('spreads tensor parallel over the cards asked for, and finds the fewest that fit', () => {
    const two = planProfile({
      engines,
      shape: llama8b,
      profile: prof('vllm'),
      device: l4,
      cards: 2,
      context: 131072,
    });
    expect(two).toMatchObject({ fits: true, cards: 2, tp: 2, pp: 1 });
    expect(two.perCard).toHaveLength(2);
    expect(two.perCard[0]!.kv).toBe(8 * GIB);
    expect(
      fewestCards({ engines, shape: llama8b, profile: prof('vllm'), device: l4, context: 131072 }),
    ).toMatchObject({ cards: 2, fits: true });
    // A MIG instance has one answer.
    expect(
      fewestCards({ engines, shape: llama8b, profile: prof('vllm'), device: mig, context: 131072 }).cards,
    ).toBe(1);
  });

  it('drops a --tensor-split written for another count of cards', () => {
    const plan = planProfile({
      engines,
      shape: llamaGguf,
      profile: prof('llamacpp', ['-ts', '3,1', '-np', '1'], { gpus_per_node: 2 }),
      device: l4,
      cards: 3,
    });
    expect(plan.notes).toContain('its --tensor-split is for 2 cards: left out for 3');
    expect(plan.perCard.map((c) => c.weights > 0)).toEqual([true, true, true]);
  });

  it("uses vLLM's defaults of its version: 0.9 before 0.21, 0.92 and CUDA graphs from it", () => {
    const at = (engineVersion: string, args: string[] = []) =>
      planProfile({
        engines,
        shape: llama8b,
        profile: prof('vllm', args),
        device: h100,
        context: 8192,
        engineVersion,
      }).perCard[0]!;
    expect(at('0.20.2').budget).toBeCloseTo(0.9 * 81559 * MIB);
    expect(at('0.20.2').parts['cudaGraphs']).toBeUndefined();
    expect(at('v0.21.0').budget).toBeCloseTo(0.92 * 81559 * MIB);
    expect(at('v0.21.0').parts['cudaGraphs']).toBe(GIB);
    expect(at('0.21.0', ['--enforce-eager']).parts['cudaGraphs']).toBeUndefined();
    expect(at('0.21.0', ['--gpu-memory-utilization=0.5']).budget).toBeCloseTo(0.5 * 81559 * MIB);
  });
});

describe('planProfile: what it does not know it says, and does not refuse for', () => {
  it.each([
    [
      "the weights' size",
      { shape: shapeFromConfig({ config: configs.llama31_8b.json }), profile: prof('vllm'), device: l4 },
      "the weights' size is not known (the sizes of the safetensors files are not known)",
    ],
    [
      "the card's memory",
      { shape: llama8b, profile: prof('vllm'), device: { class: 'x-24g', memoryBytes: 0 } },
      'the memory of a x-24g card is not known',
    ],
    [
      "a hybrid model's state",
      {
        shape: shapeFromConfig({
          config: {
            model_type: 'qwen3_next',
            num_hidden_layers: 48,
            num_attention_heads: 16,
            num_key_value_heads: 2,
            head_dim: 256,
            torch_dtype: 'bfloat16',
            max_position_embeddings: 262144,
          },
          weightBytes: 160e9,
        }),
        profile: prof('vllm', [], { tp: 4, gpus_per_node: 4 }),
        device: h100,
      },
      "its KV cache is not known (qwen3_next keeps a recurrent state in some layers, which KV bytes per token do not size): only the weights and vLLM's own memory are counted",
    ],
  ])('%s', (_name, input, said) => {
    const plan = planProfile({ engines, ...input });
    expect(plan).toMatchObject({ fits: true, checked: false, maxContext: undefined });
    expect(plan.unknown).toContain(said);
  });
});

describe('the figures around a plan', () => {
  it('knows the memory of the classes seen in captures, and errs low on others', () => {
    expect(classMemoryBytes('l4-24g')).toBe(23034 * MIB);
    expect(classMemoryBytes('a100-80g-mig-3g.40gb')).toBe(40448 * MIB);
    expect(classMemoryBytes('h200-141g-mig-1c.3g.71gb')).toBe(71424 * MIB);
    expect(classMemoryBytes('rtx4090-24g')).toBe(Math.floor(24 * 1024 * 0.935) * MIB);
    expect(classMemoryBytes('cpu')).toBeUndefined();
  });

  it("groups a GGUF's tensors by where llama.cpp puts them", () => {
    expect(
      layoutFromTensors([
        { name: 'token_embd.weight', bytes: 100 },
        { name: 'blk.0.attn_q.weight', bytes: 10 },
        { name: 'blk.0.ffn_down.weight', bytes: 5 },
        { name: 'blk.1.attn_q.weight', bytes: 7 },
        { name: 'output_norm.weight', bytes: 1 },
        { name: 'output.weight', bytes: 50 },
      ]),
    ).toEqual({ layers: [15, 7], input: 100, output: 51 });
  });

  it("takes the weights' size from the files where the shape has none, counting Mistral's twin once", () => {
    const shape = shapeFromConfig({ config: configs.llama31_8b.json });
    const files = [
      { path: 'consolidated.safetensors', size: 14 },
      { path: 'model-00001-of-00002.safetensors', size: 10 },
      { path: 'model-00002-of-00002.safetensors', size: 4 },
    ];
    expect(weightBytes({ shape, files })).toEqual(known(14));
    const gguf = [
      { path: 'm-00001-of-00002.gguf', size: 6 },
      { path: 'm-00002-of-00002.gguf', size: 3 },
      { path: 'mmproj-f16.gguf', size: 1 },
    ];
    expect(weightBytes({ shape, files: gguf })).toEqual(known(9));
    expect(weightBytes({ shape, weightBytes: 12 })).toEqual(known(12));
  });
});
