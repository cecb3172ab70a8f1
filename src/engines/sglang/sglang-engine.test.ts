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

import { sglangEngine } from './sglang-engine.js';

engineContract({
  engine: sglangEngine,
  maxNodes: 2,
  key: 'args',
  twoCards: { tp: 2, gpus_per_node: 2 },
  ownFlag: { name: '--context-length', value: '4096' },
});

const profile = (over: Parameters<typeof profileOf>[1] = {}) => profileOf('sglang', over);
const launch = (over: Partial<ShardLaunch> = {}) => launchOf('sglang', over);
const module = ['-m', 'sglang.launch_server', '--model-path', '/models/qwen-7b'];
const api = ['--host', '127.0.0.1', '--port', '18080', '--api-key', apiKey];
const env1 = { CUDA_VISIBLE_DEVICES: cards[0]?.uuid };
const allCards = { CUDA_VISIBLE_DEVICES: cards.map((c) => c.uuid).join(',') };
const twoNodes = profile({ tp: 8, gpus_per_node: 4, nodes: 2 });

const cases: [string, Partial<ShardLaunch>, string[], Record<string, string | undefined>][] = [
  [
    'one card, metrics on',
    {},
    [...module, ...api, '--served-model-name', 'qwen-7b', '--context-length', '8192', '--enable-metrics'],
    env1,
  ],
  [
    'tensor and pipeline parallel',
    { devices: cards, profile: profile({ tp: 2, pp: 2, gpus_per_node: 4 }) },
    [
      ...module,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--tp-size',
      '2',
      '--pp-size',
      '2',
      '--context-length',
      '8192',
      '--enable-metrics',
    ],
    allCards,
  ],
  [
    'tp the profile sets wins (--tp)',
    { devices: cards.slice(0, 2), profile: profile({ tp: 2, gpus_per_node: 2, args: ['--tp', '2'] }) },
    [
      ...module,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--context-length',
      '8192',
      '--enable-metrics',
      '--tp',
      '2',
    ],
    { CUDA_VISIBLE_DEVICES: `${cards[0]?.uuid},${cards[1]?.uuid}` },
  ],
  [
    'rank 0 of two nodes: the API, the rendezvous',
    { devices: cards, profile: twoNodes, ranks: 2, rank: 0, head: { address: '10.0.0.1', port: 50000 } },
    [
      ...module,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--tp-size',
      '8',
      '--nnodes',
      '2',
      '--node-rank',
      '0',
      '--dist-init-addr',
      '10.0.0.1:50000',
      '--context-length',
      '8192',
      '--enable-metrics',
    ],
    allCards,
  ],
  [
    'rank 1 of two nodes: no API, no key',
    { devices: cards, profile: twoNodes, ranks: 2, rank: 1, head: { address: '10.0.0.1', port: 50000 } },
    [
      ...module,
      '--served-model-name',
      'qwen-7b',
      '--tp-size',
      '8',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--dist-init-addr',
      '10.0.0.1:50000',
      '--context-length',
      '8192',
      '--enable-metrics',
    ],
    allCards,
  ],
  [
    'an IPv6 head in brackets',
    { devices: cards, profile: twoNodes, ranks: 2, rank: 1, head: { address: 'fd00::1', port: 50000 } },
    [
      ...module,
      '--served-model-name',
      'qwen-7b',
      '--tp-size',
      '8',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--dist-init-addr',
      '[fd00::1]:50000',
      '--context-length',
      '8192',
      '--enable-metrics',
    ],
    allCards,
  ],
  [
    'served_model_name',
    { profile: profile({ served_model_name: 'qwen' }) },
    [...module, ...api, '--served-model-name', 'qwen', '--context-length', '8192', '--enable-metrics'],
    env1,
  ],
  [
    'no context_length',
    { model: { ...model, context_length: undefined } },
    [...module, ...api, '--served-model-name', 'qwen-7b', '--enable-metrics'],
    env1,
  ],
  [
    '--enable-metrics in the profile: not twice',
    { profile: profile({ args: ['--enable-metrics'] }) },
    [...module, ...api, '--served-model-name', 'qwen-7b', '--context-length', '8192', '--enable-metrics'],
    env1,
  ],
  [
    'adapters under their names',
    {
      profile: profile({
        adapters: [
          { name: 'sql', path: '/adapters/sql' },
          { name: 'chat', path: '/adapters/chat' },
        ],
      }),
    },
    [
      ...module,
      ...api,
      '--served-model-name',
      'qwen-7b',
      '--context-length',
      '8192',
      '--enable-metrics',
      '--enable-lora',
      '--lora-paths',
      'sql=/adapters/sql',
      'chat=/adapters/chat',
    ],
    env1,
  ],
  [
    'a MIG instance',
    { devices: [migInstance], profile: profile({ gpu_class: migInstance.class }) },
    [...module, ...api, '--served-model-name', 'qwen-7b', '--context-length', '8192', '--enable-metrics'],
    { CUDA_VISIBLE_DEVICES: migInstance.uuid },
  ],
  [
    'no key: no --api-key',
    { apiKey: '' },
    [
      ...module,
      '--host',
      '127.0.0.1',
      '--port',
      '18080',
      '--served-model-name',
      'qwen-7b',
      '--context-length',
      '8192',
      '--enable-metrics',
    ],
    env1,
  ],
];

describe('SGLang commands', () => {
  it.each(cases)('%s', (_what, over, args, env) => {
    const procs = sglangEngine.commands(launch(over));
    expect(procs).toHaveLength(1);
    expect(procs[0]).toEqual({ name: 'sglang', bin: settings.bin, args, env });
  });

  it('needs the head address to span nodes', () => {
    expect(() =>
      sglangEngine.commands(launch({ devices: cards, profile: twoNodes, ranks: 2, rank: 0 })),
    ).toThrow(/names no head address/);
  });
});

describe('SGLang validate', () => {
  it('refuses a CPU profile', () => {
    expect(
      sglangEngine.validate(profile({ cpu: true, gpu_class: undefined, gpus_per_node: 0 }), []).join('\n'),
    ).toContain('write engine: llamacpp for cpu: true');
  });
});
