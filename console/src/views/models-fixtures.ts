/** Models and answers the Models and Plan tests share. */
import type { ModelGpusCheck, ModelView } from '../api.js';

const profile = {
  name: 'l4',
  engine: 'vllm' as const,
  gpu_class: 'l4-24g',
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  nodes: 1,
  args: [],
  env: {},
  adapters: [],
};

export function modelView(o: Partial<ModelView> = {}): ModelView {
  return {
    name: 'qwen',
    source: 'hf://Qwen/Qwen2.5-7B-Instruct',
    replicas: 1,
    profiles: [profile],
    metadata: { origin: 'api', version: 3 },
    status: {
      origin: {
        source: 'hf://Qwen/Qwen2.5-7B-Instruct',
        kind: 'hf',
        repo: 'Qwen/Qwen2.5-7B-Instruct',
        revision: 'main',
        commit: 'a09a35458c702b33eeacc393d103063234e8bc28',
        files: [
          { path: 'config.json', size: 663 },
          { path: 'model-00001-of-00002.safetensors', size: 8 * 2 ** 30 },
          { path: 'model-00002-of-00002.safetensors', size: 6 * 2 ** 30 },
        ],
      },
      shape: {
        from: 'config',
        architecture: 'qwen2',
        layers: { known: true, value: 28 },
        attentionHeads: { known: true, value: 28 },
        kvHeads: { known: true, value: 4 },
        keyHeadDim: { known: true, value: 128 },
        valueHeadDim: { known: true, value: 128 },
        slidingWindow: { known: true, value: null },
        mla: { known: true, value: null },
        trainedContext: { known: true, value: 32768 },
        parameters: { known: true, value: 7_615_616_512 },
        weightBytes: { known: true, value: 15_231_233_024 },
        dtype: { known: true, value: 'bf16' },
        kv: { known: false, reason: 'x' },
      },
    },
    ...o,
  };
}

export const l4Profile = profile;

export function gpusCheck(
  before: number,
  after: number,
  need: number,
  note: string | null = null,
): ModelGpusCheck {
  const side = (cards: number, need_gib: number) => ({
    cards,
    tp: cards,
    pp: 1,
    need_gib,
    budget_gib: 20.69,
    fits: true,
    max_context: 32768,
    reason: null,
  });
  return {
    model: 'qwen',
    profiles: [
      {
        profile: 'l4',
        engine: 'vllm',
        class: 'l4-24g',
        before: side(before, 17.61),
        after: side(after, need),
        dropped_args: [],
      },
    ],
    note,
    dry_run: true,
    restarted: 1,
  };
}
