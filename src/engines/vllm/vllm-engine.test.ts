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

import { vllmEngine } from './vllm-engine.js';

engineContract({
  engine: vllmEngine,
  maxNodes: 2,
  key: 'env',
  twoCards: { tp: 2, gpus_per_node: 2 },
  ownFlag: { name: '--max-model-len', value: '4096' },
});

const profile = (over: Parameters<typeof profileOf>[1] = {}) => profileOf('vllm', over);
const launch = (over: Partial<ShardLaunch> = {}) => launchOf('vllm', over);
const head = { address: '10.0.0.1', port: 29500 };
const serve = ['serve', '/models/qwen-7b'];
const api = ['--host', '127.0.0.1', '--port', '18080'];
const env1 = { CUDA_VISIBLE_DEVICES: cards[0]?.uuid, VLLM_API_KEY: apiKey };
const twoNodes = profile({ tp: 4, pp: 2, gpus_per_node: 4, nodes: 2 });

const cases: [string, Partial<ShardLaunch>, string[], Record<string, string | undefined>][] = [
  ['one card', {}, [...serve, ...api, '--served-model-name', 'qwen-7b', '--max-model-len', '8192'], env1],
  [
    'tensor parallel over two cards',
    { devices: cards.slice(0, 2), profile: profile({ tp: 2, gpus_per_node: 2 }) },
    [
      ...serve,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--tensor-parallel-size',
      '2',
      '--max-model-len',
      '8192',
    ],
    { CUDA_VISIBLE_DEVICES: `${cards[0]?.uuid},${cards[1]?.uuid}`, VLLM_API_KEY: apiKey },
  ],
  [
    'tensor and pipeline parallel over four cards',
    { devices: cards, profile: profile({ tp: 2, pp: 2, gpus_per_node: 4 }) },
    [
      ...serve,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--tensor-parallel-size',
      '2',
      '--pipeline-parallel-size',
      '2',
      '--max-model-len',
      '8192',
    ],
    { CUDA_VISIBLE_DEVICES: cards.map((c) => c.uuid).join(','), VLLM_API_KEY: apiKey },
  ],
  [
    'tp the profile sets wins (-tp)',
    { devices: cards.slice(0, 2), profile: profile({ tp: 2, gpus_per_node: 2, args: ['-tp', '2'] }) },
    [...serve, ...api, '--served-model-name', 'qwen-7b', '--max-model-len', '8192', '-tp', '2'],
    { CUDA_VISIBLE_DEVICES: `${cards[0]?.uuid},${cards[1]?.uuid}`, VLLM_API_KEY: apiKey },
  ],
  [
    'the head of two nodes: the API, the rendezvous, rank 0',
    { devices: cards, profile: twoNodes, ranks: 2, rank: 0, head },
    [
      ...serve,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--tensor-parallel-size',
      '4',
      '--pipeline-parallel-size',
      '2',
      '--nnodes',
      '2',
      '--node-rank',
      '0',
      '--master-addr',
      '10.0.0.1',
      '--master-port',
      '29500',
      '--distributed-executor-backend',
      'mp',
      '--max-model-len',
      '8192',
    ],
    { CUDA_VISIBLE_DEVICES: cards.map((c) => c.uuid).join(','), VLLM_API_KEY: apiKey },
  ],
  [
    'a worker of two nodes: headless, no API, no key',
    { devices: cards, profile: twoNodes, ranks: 2, rank: 1, head },
    [
      ...serve,
      '--served-model-name',
      'qwen-7b',
      '--tensor-parallel-size',
      '4',
      '--pipeline-parallel-size',
      '2',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--master-addr',
      '10.0.0.1',
      '--master-port',
      '29500',
      '--distributed-executor-backend',
      'mp',
      '--headless',
      '--max-model-len',
      '8192',
    ],
    { CUDA_VISIBLE_DEVICES: cards.map((c) => c.uuid).join(',') },
  ],
  [
    'an executor backend the profile sets wins',
    {
      devices: cards,
      profile: { ...twoNodes, args: ['--distributed-executor-backend', 'ray'] },
      ranks: 2,
      rank: 0,
      head,
    },
    [
      ...serve,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--tensor-parallel-size',
      '4',
      '--pipeline-parallel-size',
      '2',
      '--nnodes',
      '2',
      '--node-rank',
      '0',
      '--master-addr',
      '10.0.0.1',
      '--master-port',
      '29500',
      '--max-model-len',
      '8192',
      '--distributed-executor-backend',
      'ray',
    ],
    { CUDA_VISIBLE_DEVICES: cards.map((c) => c.uuid).join(','), VLLM_API_KEY: apiKey },
  ],
  [
    'served_model_name',
    { profile: profile({ served_model_name: 'qwen' }) },
    [...serve, ...api, '--served-model-name', 'qwen', '--max-model-len', '8192'],
    env1,
  ],
  [
    'a served name the profile sets wins',
    { profile: profile({ args: ['--served-model-name', 'a', 'b'] }) },
    [...serve, ...api, '--max-model-len', '8192', '--served-model-name', 'a', 'b'],
    env1,
  ],
  [
    'no context_length: the model config says',
    { model: { ...model, context_length: undefined } },
    [...serve, ...api, '--served-model-name', 'qwen-7b'],
    env1,
  ],
  [
    'adapters: each under its name, all in one batch',
    {
      profile: profile({
        adapters: [
          { name: 'sql', path: '/adapters/sql' },
          { name: 'chat', path: '/adapters/chat' },
        ],
      }),
    },
    [
      ...serve,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--max-model-len',
      '8192',
      '--enable-lora',
      '--lora-modules',
      'sql=/adapters/sql',
      'chat=/adapters/chat',
      '--max-loras',
      '2',
    ],
    env1,
  ],
  [
    'adapter settings the profile sets win',
    {
      profile: profile({
        adapters: [{ name: 'sql', path: '/adapters/sql' }],
        args: ['--max-loras=4', '--max-lora-rank', '64'],
      }),
    },
    [
      ...serve,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--max-model-len',
      '8192',
      '--enable-lora',
      '--lora-modules',
      'sql=/adapters/sql',
      '--max-loras=4',
      '--max-lora-rank',
      '64',
    ],
    env1,
  ],
  [
    'a MIG instance',
    { devices: [migInstance], profile: profile({ gpu_class: migInstance.class }) },
    [...serve, ...api, '--served-model-name', 'qwen-7b', '--max-model-len', '8192'],
    { CUDA_VISIBLE_DEVICES: migInstance.uuid, VLLM_API_KEY: apiKey },
  ],
  [
    'no key: no VLLM_API_KEY',
    { apiKey: '' },
    [...serve, ...api, '--served-model-name', 'qwen-7b', '--max-model-len', '8192'],
    { CUDA_VISIBLE_DEVICES: cards[0]?.uuid },
  ],
];

describe('vLLM commands', () => {
  it.each(cases)('%s', (_what, over, args, env) => {
    const procs = vllmEngine.commands(launch(over));
    expect(procs).toHaveLength(1);
    expect(procs[0]).toEqual({ name: 'vllm', bin: settings.bin, args, env });
  });

  it('needs the head address to span nodes', () => {
    expect(() =>
      vllmEngine.commands(launch({ devices: cards, profile: twoNodes, ranks: 2, rank: 1 })),
    ).toThrow(/names no head address/);
  });
});

describe('vLLM validate', () => {
  it('refuses a CPU profile, saying which engine runs there', () => {
    expect(vllmEngine.validate(profile({ cpu: true, gpu_class: undefined, gpus_per_node: 0 }), [])).toEqual([
      'vllm does not run on CPUs under llmgw: write engine: llamacpp for cpu: true, or give a gpu_class',
    ]);
  });

  it("accepts a node's share of a two-node replica", () => {
    expect(vllmEngine.validate(twoNodes, cards)).toEqual([]);
  });
});
