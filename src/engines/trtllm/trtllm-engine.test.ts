import { describe, expect, it } from 'vitest';

import {
  apiKey,
  cards,
  engineContract,
  launch as launchOf,
  migInstance,
  model,
  profile as profileOf,
  settings,
} from '../engine.contract.js';
import type { ShardLaunch } from '../types.js';

import { trtllmEngine } from './trtllm-engine.js';

engineContract({
  engine: trtllmEngine,
  maxNodes: 1,
  key: 'none',
  twoCards: { tp: 2, gpus_per_node: 2 },
  ownFlag: { name: '--max_seq_len', value: '4096' },
});

const profile = (over: Parameters<typeof profileOf>[1] = {}) => profileOf('trtllm', over);
const launch = (over: Partial<ShardLaunch> = {}) => launchOf('trtllm', over);
const api = ['/models/qwen-7b', '--host', '127.0.0.1', '--port', '18080'];
const env1 = { CUDA_VISIBLE_DEVICES: cards[0]?.uuid };

const cases: [string, Partial<ShardLaunch>, string[], Record<string, string | undefined>][] = [
  ['one card', {}, [...api, '--max_seq_len', '8192'], env1],
  [
    'tensor and pipeline parallel',
    { devices: cards, profile: profile({ tp: 2, pp: 2, gpus_per_node: 4 }) },
    [...api, '--tp_size', '2', '--pp_size', '2', '--max_seq_len', '8192'],
    { CUDA_VISIBLE_DEVICES: cards.map((c) => c.uuid).join(',') },
  ],
  [
    'tp the profile sets wins (--tensor_parallel_size=)',
    {
      devices: cards.slice(0, 2),
      profile: profile({ tp: 2, gpus_per_node: 2, args: ['--tensor_parallel_size=2'] }),
    },
    [...api, '--max_seq_len', '8192', '--tensor_parallel_size=2'],
    { CUDA_VISIBLE_DEVICES: `${cards[0]?.uuid},${cards[1]?.uuid}` },
  ],
  ['no context_length', { model: { ...model, context_length: undefined } }, api, env1],
  [
    'a MIG instance',
    { devices: [migInstance], profile: profile({ gpu_class: migInstance.class }) },
    [...api, '--max_seq_len', '8192'],
    { CUDA_VISIBLE_DEVICES: migInstance.uuid },
  ],
];

describe('TensorRT-LLM commands', () => {
  it.each(cases)('%s', (_what, over, args, env) => {
    const procs = trtllmEngine.commands(launch(over));
    expect(procs).toHaveLength(1);
    expect(procs[0]).toEqual({ name: 'trtllm-serve', bin: settings.bin, args, env });
  });

  it('passes no key anywhere: trtllm-serve has no option for one', () => {
    const [p] = trtllmEngine.commands(launch());
    expect(JSON.stringify(p)).not.toContain(apiKey);
  });

  it('refuses a launch over several nodes', () => {
    expect(() =>
      trtllmEngine.commands(launch({ ranks: 2, rank: 0, head: { address: '10.0.0.1', port: 29500 } })),
    ).toThrow(/use engine: vllm or sglang/);
  });
});

describe('TensorRT-LLM validate', () => {
  it('refuses several nodes, saying what to write instead', () => {
    expect(
      trtllmEngine
        .validate(profile({ tp: 8, pp: 2, gpus_per_node: 8, nodes: 2 }), cards.slice(0, 4))
        .join('\n'),
    ).toContain(
      'trtllm spans nodes only under mpirun, which llmgw does not launch: use engine: vllm or sglang for a 2-node replica, or fit it on one node (nodes: 1, gpus_per_node: 16)',
    );
  });

  it('refuses a CPU profile', () => {
    expect(
      trtllmEngine.validate(profile({ cpu: true, gpu_class: undefined, gpus_per_node: 0 }), []).join('\n'),
    ).toContain('trtllm does not run on CPUs');
  });
});
