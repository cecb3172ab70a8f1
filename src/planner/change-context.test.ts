import { describe, expect, it } from 'vitest';

import { asMetadata } from '../../test/fakes/gguf/metadata.js';
import { engines } from '../../test/support/engines.js';
import { configs, llama31_8b } from '../../test/fakes/gguf/models.js';
import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import { isLlmgwError } from '../core/errors.js';
import { shapeFromConfig } from '../models/config-shape.js';
import { shapeFromGguf } from '../models/gguf-shape.js';
import { known } from '../models/shape.js';
import { changeContext, contextArgs, type ContextInput, nextMaxOutput, setFlag } from './change-context.js';
import { GIB } from './units.js';

const llama8b = shapeFromConfig({
  config: configs.llama31_8b.json,
  weightBytes: configs.llama31_8b.weightBytes,
});
/** Llama-3.1-8B as a Q4_K_M GGUF whose tensor infos gave 4.58 GiB; trained for 131072 tokens. */
const llamaGguf = { ...shapeFromGguf({ metadata: asMetadata(llama31_8b) }), weightBytes: known(4.58 * GIB) };

const profile = (more: Partial<ProfileSpec> & Pick<ProfileSpec, 'name' | 'engine'>): ProfileSpec => ({
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  nodes: 1,
  args: [],
  env: {},
  adapters: [],
  ...more,
});
const vllmL4 = profile({ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' });
const cpuProfile = profile({ name: 'cpu', engine: 'llamacpp', cpu: true, gpus_per_node: 0 });
const model = (profiles: ProfileSpec[], more: Partial<ModelSpec> = {}): ModelSpec => ({
  name: 'llama',
  source: 'hf://meta-llama/Llama-3.1-8B-Instruct',
  context_length: 8192,
  replicas: 1,
  profiles,
  ...more,
});
const input = (more: Partial<ContextInput>): ContextInput => ({
  engines,
  spec: model([vllmL4]),
  declared: false,
  shape: llama8b,
  tokens: 32768,
  classes: [],
  defaultSlots: 4,
  ...more,
});
const gguf = (profiles: ProfileSpec[], more: Partial<ContextInput> = {}) =>
  input({
    spec: model(profiles, { source: 'hf://org/llama-GGUF/llama-Q4_K_M.gguf' }),
    shape: llamaGguf,
    ...more,
  });

describe('changeContext: what is refused, and why', () => {
  const refusals: [string, ContextInput, string, string][] = [
    [
      'a model declared in the settings file',
      input({ declared: true }),
      'read_only',
      'model "llama" is declared in the settings file, so its context is changed there: edit its context_length (and its profiles\' args) with llmgw ctl config edit',
    ],
    [
      'fewer than 256 tokens',
      input({ tokens: 255 }),
      'invalid_argument',
      'a context is a whole number of tokens from 256 to 16777216, not 255',
    ],
    [
      'more tokens than the planner looks at',
      input({ tokens: 2 ** 24 + 1 }),
      'invalid_argument',
      'a context is a whole number of tokens from 256 to 16777216, not 16777217',
    ],
    [
      'no slots',
      gguf([cpuProfile], { slots: 0 }),
      'invalid_argument',
      'slots are the requests llama.cpp serves at once, 1 to 64, not 0',
    ],
    [
      'more than 64 slots',
      gguf([cpuProfile], { slots: 65 }),
      'invalid_argument',
      'slots are the requests llama.cpp serves at once, 1 to 64, not 65',
    ],
    [
      'slots for a model without a llama.cpp profile',
      input({ slots: 2 }),
      'invalid_argument',
      'slots are llama.cpp\'s (requests at once, each with the whole context), and model "llama" has no llama.cpp profile: its engines share one KV pool among the requests they batch; leave slots out',
    ],
    [
      'a context past the trained one, naming it and the engine that refuses it',
      input({ tokens: 131072 + 256 }),
      'invalid_argument',
      'llama was trained for a context of 131072 tokens: past it the model answers worse, and vLLM refuses to start with it; ask for 131072 tokens or fewer',
    ],
    [
      'a context past the trained one on llama.cpp alone',
      gguf([cpuProfile], { tokens: 262144 }),
      'invalid_argument',
      'llama was trained for a context of 131072 tokens: past it the model answers worse; ask for 131072 tokens or fewer',
    ],
    [
      'a TensorRT-LLM profile, whose context is built in',
      input({
        spec: model([vllmL4, profile({ name: 'trt', engine: 'trtllm', gpu_class: 'h100-80g' })]),
      }),
      'precondition_failed',
      'profile "trt" runs TensorRT-LLM, whose context is fixed when its engine is built (max_seq_len, max_num_tokens): build the engine again for the new context and apply the model with it (llmgw ctl model apply -f FILE), or leave that profile out',
    ],
    [
      "a context the card does not hold, with the planner's numbers and what fits",
      input({ tokens: 131072 }),
      'precondition_failed',
      'a context of 131072 tokens does not fit profile "l4" (vLLM on l4-24g): needs 32.7 GiB a card on l4-24g (weights 15.0, KV 16.0 at 131072 tokens, overhead 1.7), the card gives 20.7 (vLLM\'s 0.92 of 22.5): a context up to 33024 fits, or 2 cards (llmgw ctl model context llama 33024, or llmgw ctl model gpus llama 2 --profile l4)',
    ],
    [
      "a context the node's reported card memory does not hold (not the class's)",
      input({ tokens: 32768, classes: [{ class: 'l4-24g', memoryBytes: 20 * GIB }] }),
      'precondition_failed',
      'a context of 32768 tokens does not fit profile "l4" (vLLM on l4-24g): needs 20.7 GiB a card on l4-24g (weights 15.0, KV 4.0 at 32768 tokens, overhead 1.7), the card gives 18.4 (vLLM\'s 0.92 of 20.0): a context up to 14080 fits, or 2 cards (llmgw ctl model context llama 14080, or llmgw ctl model gpus llama 2 --profile l4)',
    ],
    [
      "a CPU profile's pool past the largest node's RAM",
      gguf([cpuProfile], { tokens: 131072, slots: 4, classes: [{ class: 'cpu', memoryBytes: 32 * GIB }] }),
      'precondition_failed',
      'a context of 131072 tokens does not fit profile "cpu" (llama.cpp on CPUs): needs 70.2 GiB of RAM (weights 4.6, KV 64.0 at 524288 tokens (4 slots of 131072), overhead 1.6), the node has 32.0: a context up to 53248 fits with 4 slots (llmgw ctl model context llama 53248 --slots 4)',
    ],
    [
      'tensor parallel that does not split the heads, as the planner words it',
      input({
        spec: model([profile({ name: 'tp3', engine: 'vllm', gpu_class: 'l4-24g', tp: 3, gpus_per_node: 3 })]),
      }),
      'precondition_failed',
      'profile "tp3" (vLLM on l4-24g) cannot run as it is, so its context is not changed: Total number of attention heads (32) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4, 8, 16.',
    ],
  ];
  it.each(refusals)('refuses %s', (_name, given, code, message) => {
    let thrown: unknown;
    try {
      changeContext(given);
    } catch (e) {
      thrown = e;
    }
    expect(isLlmgwError(thrown) ? [thrown.code, thrown.message] : thrown).toEqual([code, message]);
  });
});

describe('changeContext: the new spec, and each profile before and after', () => {
  it('sets vLLM --max-model-len and context_length, with the memory a card needs before and after', () => {
    const { spec, change } = changeContext(input({}));
    expect(spec.context_length).toBe(32768);
    expect(spec.profiles[0]?.args).toEqual(['--max-model-len', '32768']);
    expect(change).toMatchObject({
      model: 'llama',
      before: 8192,
      after: 32768,
      max_output: null,
      trained: 131072,
    });
    expect(change.note).toBeUndefined();
    const [p] = change.profiles;
    expect(p?.before?.words).toBe('17.7 of 20.7 GiB a card (weights 15.0, KV 1.0 at 8192 tokens)');
    expect(p?.after?.words).toBe('20.7 of 20.7 GiB a card (weights 15.0, KV 4.0 at 32768 tokens)');
    expect(p?.after).toMatchObject({
      need_gib: 20.65,
      budget_gib: 20.69,
      kv_gib: 4,
      cards: 1,
      context: 32768,
    });
  });

  it("recomputes a CPU profile's RAM, pool tokens × slots, and reserves it", () => {
    const cpu = { ...cpuProfile, args: ['-c', '32768', '-np', '4'] };
    const { spec, change } = changeContext(
      gguf([cpu], { tokens: 16384, slots: 2, classes: [{ class: 'cpu', memoryBytes: 64 * GIB }] }),
    );
    expect(spec.profiles[0]).toMatchObject({ args: ['-c', '32768', '-np', '2'], min_memory_gb: 9.8 });
    const [p] = change.profiles;
    expect(p?.before?.words).toBe('9.7 of 64.0 GiB of RAM (weights 4.6, KV 4.0 at 4 slots × 8192 tokens)');
    expect(p?.after?.words).toBe('9.7 of 64.0 GiB of RAM (weights 4.6, KV 4.0 at 2 slots × 16384 tokens)');
    expect(p?.min_memory_gb).toBe(9.8);
  });

  // min_memory_gb is what placement reserves on a node for a CPU replica.
  const reserves: [string, number | undefined, number][] = [
    ["unset: the planner's figure", undefined, 7.8],
    ['lower than needed: raised', 2, 7.8],
    ['set by hand above the need: kept', 48, 48],
    ["the planner's figure before (21.9 at 4 × 32768 tokens): follows it down", 21.9, 7.8],
  ];
  it.each(reserves)("a CPU profile's min_memory_gb %s", (_name, had, after) => {
    const cpu = { ...cpuProfile, ...(had === undefined ? {} : { min_memory_gb: had }) };
    const spec = model([cpu], { context_length: 32768 });
    const { change } = changeContext(
      gguf([cpu], { spec, tokens: 4096, classes: [{ class: 'cpu', memoryBytes: 64 * GIB }] }),
    );
    expect(change.profiles[0]?.min_memory_gb).toBe(after);
    expect(change.profiles[0]?.before?.need_gib).toBe(21.82);
  });

  it('says once what it could not check, and still changes the args', () => {
    const { spec, change } = changeContext(
      gguf([cpuProfile, { ...cpuProfile, name: 'cpu2' }], { tokens: 4096 }),
    );
    expect(spec.profiles.map((p) => p.args)).toEqual([
      ['--ctx-size', '16384', '--parallel', '4'],
      ['--ctx-size', '16384', '--parallel', '4'],
    ]);
    expect(change.note).toBe(
      'not checked: no node\'s RAM is known, so profile "cpu" was counted but not checked against one; no node\'s RAM is known, so profile "cpu2" was counted but not checked against one',
    );
    expect(change.profiles[0]?.after).toMatchObject({ budget_gib: null, need_gib: 7.71 });
    const unknown = changeContext(input({ shape: undefined, shapeProblem: 'the hub did not answer' }));
    expect(unknown.change.note).toBe(
      "not checked: the model's shape is not known (the hub did not answer), so no profile's memory was counted",
    );
    expect(unknown.change.profiles[0]).toMatchObject({
      before: null,
      after: null,
      args: ['--max-model-len', '32768'],
    });
    expect(unknown.change.trained).toBeNull();
  });
});

describe("the engines' context flags", () => {
  const llama = (args: string[]) => profile({ name: 'p', engine: 'llamacpp', gpu_class: 'l4-24g', args });
  const cases: [string, ProfileSpec, number, number | undefined, string[]][] = [
    [
      'llama.cpp without either: both added, the default slots',
      llama(['--flash-attn', 'on']),
      8192,
      undefined,
      ['--flash-attn', 'on', '--ctx-size', '32768', '--parallel', '4'],
    ],
    [
      'llama.cpp short spellings replaced in place, its slots kept',
      llama(['-c', '4096', '-np', '2', '-fa', 'on']),
      8192,
      undefined,
      ['-c', '16384', '-np', '2', '-fa', 'on'],
    ],
    [
      'llama.cpp both spellings and = forms: the first replaced, the others dropped',
      llama(['--ctx-size=4096', '--parallel', '2', '-c', '100', '-np=3']),
      8192,
      8,
      ['--ctx-size=65536', '--parallel', '8'],
    ],
    [
      'llama.cpp automatic slots: one pool of the context',
      llama(['-np', '-1']),
      8192,
      undefined,
      ['-np', '-1', '--ctx-size', '8192'],
    ],
    [
      'vLLM: both spellings of --max-model-len',
      profile({
        name: 'v',
        engine: 'vllm',
        args: ['--max_model_len', '4096', '--max-model-len=2048', '-O3'],
      }),
      8192,
      undefined,
      ['--max_model_len', '8192', '-O3'],
    ],
    [
      'SGLang: --context-length added',
      profile({ name: 's', engine: 'sglang', args: ['--mem-fraction-static', '0.8'] }),
      8192,
      undefined,
      ['--mem-fraction-static', '0.8', '--context-length', '8192'],
    ],
  ];
  it.each(cases)('%s', (_name, p, tokens, slots, args) => {
    expect(contextArgs(p, tokens, { engines, slots, defaultSlots: 4 })).toEqual(args);
  });

  it('setFlag appends the first spelling when none is set, and a trailing flag takes the value', () => {
    expect(setFlag(['-v'], ['--ctx-size', '-c'], '512')).toEqual(['-v', '--ctx-size', '512']);
    expect(setFlag(['-c'], ['--ctx-size', '-c'], '512')).toEqual(['-c', '512']);
  });
});

describe('max_output follows the context where it was the default', () => {
  const cases: [string, number | undefined, number | undefined, number, number | undefined][] = [
    ['unset stays unset: a request may use the rest of its context', 8192, undefined, 32768, undefined],
    ['the whole old context follows to the new one', 8192, 8192, 32768, 32768],
    ['set by hand: kept', 8192, 2048, 32768, 2048],
    ['never past a shorter context', 32768, 16384, 4096, 4096],
    ['set without a context_length: kept up to the new context', undefined, 4096, 2048, 2048],
  ];
  it.each(cases)('%s', (_name, context, maxOutput, tokens, after) => {
    const spec = {
      ...(context === undefined ? {} : { context_length: context }),
      ...(maxOutput === undefined ? {} : { max_output: maxOutput }),
    };
    expect(nextMaxOutput(spec, tokens)).toBe(after);
    const { context_length: _c, ...bare } = model([vllmL4]);
    const s = changeContext(input({ spec: { ...bare, ...spec }, tokens, shape: undefined })).spec;
    expect(s.max_output).toBe(after);
    expect('max_output' in s).toBe(after !== undefined);
  });
});
