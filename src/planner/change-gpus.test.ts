import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { engines } from '../../test/support/engines.js';
import { configs, llama31_8b } from '../../test/fakes/gguf/models.js';
import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { shapeFromGguf } from '../models/gguf-shape.js';
import { known, type ModelShape } from '../models/shape.js';
import { changeGpus, type GpusChangeInput } from './change-gpus.js';
import { GIB, MIB } from './units.js';
import { gpuProfile } from '../../test/support/profiles.js';

/** Llama-3.1-8B bf16: 32 heads, 8 KV heads, 14.96 GiB, 131072 tokens trained. */
const llama8b = shapeFromConfig({
  config: configs.llama31_8b.json,
  weightBytes: configs.llama31_8b.weightBytes,
});
/** Qwen2.5-7B: 28 heads, 4 KV heads. */
const qwen7b = shapeFromConfig({
  config: configs.qwen25_7b.json,
  weightBytes: configs.qwen25_7b.weightBytes,
});
const llamaGguf: ModelShape = {
  ...shapeFromGguf({ metadata: asMetadata(llama31_8b) }),
  weightBytes: known(4.58 * GIB),
};

const prof = gpuProfile;
const cpu = prof({ name: 'cpu', engine: 'llamacpp', gpu_class: undefined, cpu: true, gpus_per_node: 0 });
const model = (profiles: ProfileSpec[], more: Partial<ModelSpec> = {}): ModelSpec => ({
  name: 'm',
  source: 'hf://org/m',
  replicas: 1,
  profiles,
  ...more,
});
const nodes: GpusChangeInput['nodes'] = [
  { name: 'gpu-b', cards: { 'l4-24g': 4, 'a100-80g': 8 } },
  { name: 'gpu-a', cards: { 'l4-24g': 2 } },
  { name: 'cpu-only', cards: {} },
];
const classes = [
  { class: 'l4-24g', memoryBytes: 23034 * MIB },
  { class: 'a100-80g', memoryBytes: 81920 * MIB },
];
const input = (more: Partial<GpusChangeInput> & Pick<GpusChangeInput, 'spec' | 'gpus'>): GpusChangeInput => ({
  engines,
  shape: llama8b,
  nodes,
  classes,
  ...more,
});

function refusal(i: GpusChangeInput): { code: string; message: string } {
  try {
    changeGpus(i);
  } catch (e) {
    if (e instanceof LlmgwError) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('not refused');
}

describe('changeGpus: what is refused, and why', () => {
  const cases: [string, GpusChangeInput, string, string][] = [
    [
      'no card at all',
      input({ spec: model([prof()]), gpus: 0 }),
      'invalid_argument',
      'the cards a replica uses are a whole number from 1 to 64, not 0',
    ],
    [
      'an unknown profile, with the one meant',
      input({ spec: model([prof(), cpu]), gpus: 2, profile: 'gpo' }),
      'not_found',
      'model "m" has no profile "gpo"; did you mean "gpu"? (its profiles: gpu, cpu)',
    ],
    [
      'several GPU profiles and none named',
      input({
        spec: model([prof({ name: 'l4' }), cpu, prof({ name: 'a100', gpu_class: 'a100-80g' })]),
        gpus: 2,
      }),
      'invalid_argument',
      'model "m" has several GPU profiles (l4, a100): say which with --profile (profile in the API)',
    ],
    [
      'a model on CPUs only',
      input({ spec: model([cpu]), gpus: 2, shape: llamaGguf }),
      'precondition_failed',
      'model "m" runs on CPUs only (profile "cpu"), on no card: give it a GPU profile with a gpu_class to run it on cards (llmgw ctl model get m, then llmgw ctl model apply -f FILE)',
    ],
    [
      'a CPU profile named',
      input({ spec: model([prof(), cpu]), gpus: 2, profile: 'cpu', shape: llamaGguf }),
      'precondition_failed',
      'profile "cpu" of "m" runs on CPUs (cpu: true), on no card: give the model a GPU profile with a gpu_class to run it on cards (llmgw ctl model get m, then llmgw ctl model apply -f FILE)',
    ],
    [
      'a MIG instance (seed 000: one instance or nothing)',
      input({ spec: model([prof({ gpu_class: 'a100-80g-mig-3g.40gb' })]), gpus: 2 }),
      'precondition_failed',
      'profile "gpu" of "m" runs on a100-80g-mig-3g.40gb, a MIG instance, and a replica runs on exactly one (a process opens one MIG device, and instances have no NVLink or P2P between them): for 2 cards give it a whole-card class such as a100-80g (llmgw ctl model get m, then llmgw ctl model apply -f FILE)',
    ],
    [
      'llama.cpp told to keep the model on one card',
      input({
        spec: model([prof({ engine: 'llamacpp', args: ['-sm', 'none'] })]),
        gpus: 2,
        shape: llamaGguf,
      }),
      'precondition_failed',
      'profile "gpu" of "m" runs llama.cpp with --split-mode none, which keeps the whole model on one card however many it is given: remove it from the profile\'s args to split the layers over 2 cards (llmgw ctl model get m, then llmgw ctl model apply -f FILE)',
    ],
    [
      'the count it has',
      input({ spec: model([prof({ tp: 2, gpus_per_node: 2 })]), gpus: 2 }),
      'invalid_argument',
      'profile "gpu" of "m" already uses 2 cards of a node a replica: nothing to change',
    ],
    [
      "attention heads tensor parallel does not divide (vLLM's words)",
      input({ spec: model([prof()]), gpus: 3, shape: qwen7b }),
      'precondition_failed',
      'vLLM cannot spread m over 3 cards (tensor parallel 3): Total number of attention heads (28) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4.',
    ],
    [
      'KV heads tensor parallel neither divides nor is a multiple of',
      input({ spec: model([prof({ engine: 'sglang' })]), gpus: 14, shape: qwen7b }),
      'precondition_failed',
      "SGLang cannot spread m over 14 cards (tensor parallel 14): 14 is not divisible by 4: the model's 4 KV heads cannot be spread over tensor parallel size 14, which must divide them or be a multiple of them. Tensor parallel sizes that split this model: 1, 2, 4.",
    ],
    [
      'a count no node of the class has',
      input({ spec: model([prof()]), gpus: 8 }),
      'precondition_failed',
      'no node has 8 l4-24g cards: the nodes with that class have 2 or 4 (gpu-a 2, gpu-b 4); use one of those counts, or join a node with 8',
    ],
    [
      'a replica over two nodes, only one of which has the count',
      input({ spec: model([prof({ pp: 2, nodes: 2 })]), gpus: 4 }),
      'precondition_failed',
      'a replica spans 2 nodes, and fewer than 2 have 4 l4-24g cards: the nodes with that class have 2 or 4 (gpu-a 2, gpu-b 4); use one of those counts, or join a node with 4',
    ],
    [
      "cards that do not hold the weights and the context (the planner's numbers)",
      input({ spec: model([prof({ tp: 2, gpus_per_node: 2 })], { context_length: 131072 }), gpus: 1 }),
      'precondition_failed',
      '1 card of l4-24g would not hold a replica of m on vLLM (profile "gpu" of "m"): needs 32.7 GiB a card on l4-24g (weights 15.0, KV 16.0 at 131072 tokens, overhead 1.7), the card gives 20.7 (vLLM\'s 0.92 of 22.5): a context up to 33024 fits, or 2 cards',
    ],
  ];
  it.each(cases)('%s', (_what, i, code, message) => {
    const before = structuredClone(i.spec);
    expect(refusal(i)).toEqual({ code, message });
    expect(i.spec).toEqual(before);
  });
});

describe('changeGpus: the profile on the new count', () => {
  it('vLLM: tensor parallel follows the cards, and the planner says what each card needs before and after', () => {
    const spec = model([prof({ args: ['--tensor-parallel-size', '1', '--max-num-seqs', '8'] }), cpu], {
      context_length: 131072,
    });
    const c = changeGpus(input({ spec, gpus: 2 }));
    expect(c.spec.profiles[0]).toEqual(prof({ tp: 2, gpus_per_node: 2, args: ['--max-num-seqs', '8'] }));
    expect(c.spec.profiles[1]).toEqual(cpu);
    expect(c).toMatchObject({
      profile: 'gpu',
      engine: 'vllm',
      class: 'l4-24g',
      dropped: ['--tensor-parallel-size 1'],
      unchecked: [],
      before: { cards: 1, tp: 1, pp: 1, plan: { fits: false, cards: 1 } },
      after: { cards: 2, tp: 2, pp: 1, plan: { fits: true, checked: true, cards: 2, tp: 2 } },
    });
  });

  it('keeps pipeline stages that still divide the cards, and drops them where they do not', () => {
    const spec = model([prof({ engine: 'sglang', tp: 1, pp: 2, gpus_per_node: 2, args: ['--pp-size=2'] })]);
    const four = changeGpus(input({ spec, gpus: 4 }));
    expect(four.spec.profiles[0]).toMatchObject({ tp: 2, pp: 2, gpus_per_node: 4, args: ['--pp-size=2'] });
    expect(four.dropped).toEqual([]);
    // Three cards: no pipeline of two; and past what the shape knows, said once.
    const three = changeGpus(
      input({ spec, gpus: 3, shape: undefined, shapeUnknown: 'the hub did not answer' }),
    );
    expect(three.spec.profiles[0]).toMatchObject({ tp: 3, pp: 1, gpus_per_node: 3, args: [] });
    expect(three.dropped).toEqual(['--pp-size=2']);
    expect(three.unchecked).toEqual([
      'its shape is not known (the hub did not answer): whether 3 cards split its heads and hold its weights and context is not checked',
    ]);
    expect(three.after.plan).toBeUndefined();
  });

  it('TensorRT-LLM over two nodes: tp × pp stays gpus_per_node × nodes', () => {
    const spec = model([prof({ engine: 'trtllm', tp: 1, pp: 2, nodes: 2, gpus_per_node: 1 })]);
    const c = changeGpus(input({ spec, gpus: 2 }));
    expect(c.spec.profiles[0]).toMatchObject({ tp: 2, pp: 2, gpus_per_node: 2, nodes: 2 });
  });

  it('llama.cpp: the layers over N cards, its split for the old count dropped', () => {
    const spec = model([
      prof({
        engine: 'llamacpp',
        gpus_per_node: 2,
        args: ['-ts', '3,1', '-c', '8192', '--tensor-split=1,1'],
      }),
    ]);
    const c = changeGpus(input({ spec, gpus: 4, shape: llamaGguf }));
    expect(c.spec.profiles[0]).toEqual(prof({ engine: 'llamacpp', gpus_per_node: 4, args: ['-c', '8192'] }));
    expect(c.dropped).toEqual(['-ts 3,1', '--tensor-split=1,1']);
    expect(c.after).toMatchObject({ cards: 4, tp: 1, plan: { fits: true, cards: 4 } });
    expect(c.before.plan?.cards).toBe(2);
  });

  it('says once what could not be checked: a class no node has, the card memory it does not know', () => {
    const spec = model([prof({ gpu_class: 'x9-48g' })], { context_length: 8192 });
    const c = changeGpus(input({ spec, gpus: 2, classes: [] }));
    expect(c.spec.profiles[0]).toMatchObject({ tp: 2, gpus_per_node: 2 });
    expect(c.unchecked).toEqual(['no node with x9-48g cards has joined: whether one has 2 is not checked']);
    // x9-48g has a size in its name: the class's share of it stands in for a node's report.
    expect(c.after.plan?.checked).toBe(true);
  });

  it('uses the memory a node reported for the class, not the class figure', () => {
    const spec = model([prof({ gpu_class: 'a100-80g' })], { context_length: 131072 });
    const small = [{ class: 'a100-80g', memoryBytes: 16 * 1024 * MIB }];
    expect(refusal(input({ spec, gpus: 2, classes: small })).message).toMatch(
      /^2 cards of a100-80g would not hold a replica of m on vLLM \(profile "gpu" of "m"\): needs [\d.]+ GiB a card on a100-80g/,
    );
    expect(changeGpus(input({ spec, gpus: 2 })).after.plan?.fits).toBe(true);
  });
});
