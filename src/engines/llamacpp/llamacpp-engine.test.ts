import { describe, expect, it } from 'vitest';

import { isLlmgwError } from '../../core/errors.js';
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

import { ggufIn, llamacppEngine, parseListDevices, parseVersion } from './llamacpp-engine.js';

engineContract({
  engine: llamacppEngine,
  maxNodes: 1,
  key: 'env',
  twoCards: { gpus_per_node: 2 },
  ownFlag: { name: '--parallel', value: '2' },
});

const profile = (over: Parameters<typeof profileOf>[1] = {}) => profileOf('llamacpp', over);
const launch = (over: Partial<ShardLaunch> = {}) => launchOf('llamacpp', over);
const cpu = profile({ cpu: true, gpu_class: undefined, gpus_per_node: 0 });
const file = '/models/qwen-7b/qwen-7b-q4_k_m.gguf';

/** What every launch starts with: the model, where it listens, metrics. */
const head = ['--model', file, '--host', '127.0.0.1', '--port', '18080', '--metrics'];
const gpuEnv = { CUDA_VISIBLE_DEVICES: cards[0]?.uuid, GGML_VK_VISIBLE_DEVICES: '0', LLAMA_API_KEY: apiKey };
const cpuEnv = { CUDA_VISIBLE_DEVICES: '', GGML_VK_VISIBLE_DEVICES: '', LLAMA_API_KEY: apiKey };

/** Each rule, one launch: the exact arguments and environment it gives. */
const cases: [string, Partial<ShardLaunch>, string[], Record<string, string | undefined>][] = [
  [
    'one card: all layers on it, four slots, each with the whole context',
    {},
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'two cards: split by layer, both named to CUDA and Vulkan',
    { devices: cards.slice(1, 3), profile: profile({ gpus_per_node: 2 }) },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
      '--split-mode',
      'layer',
    ],
    {
      CUDA_VISIBLE_DEVICES: `${cards[1]?.uuid},${cards[2]?.uuid}`,
      GGML_VK_VISIBLE_DEVICES: '1,2',
      LLAMA_API_KEY: apiKey,
    },
  ],
  [
    'a MIG instance: CUDA by MIG UUID, no Vulkan list',
    { devices: [migInstance], profile: profile({ gpu_class: migInstance.class }) },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    { CUDA_VISIBLE_DEVICES: migInstance.uuid, LLAMA_API_KEY: apiKey },
  ],
  [
    'CPU: no GPU layers, half the CPUs, every GPU hidden',
    { devices: [], profile: cpu },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '--threads', '8'],
    cpuEnv,
  ],
  [
    'CPU: the threads placement reserved come first',
    {
      devices: [],
      profile: cpu,
      threads: 3,
      settings: { ...settings, llamacpp: { ...settings.llamacpp, threads: 6 } },
    },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '--threads', '3'],
    cpuEnv,
  ],
  [
    'CPU: then the setting',
    { devices: [], profile: cpu, settings: { ...settings, llamacpp: { ...settings.llamacpp, threads: 6 } } },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '--threads', '6'],
    cpuEnv,
  ],
  [
    'CPU: at least one thread on a one-CPU node',
    { devices: [], profile: cpu, settings: { ...settings, cpuCount: 1 } },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '--threads', '1'],
    cpuEnv,
  ],
  [
    'CPU: threads the profile sets win',
    { devices: [], profile: { ...cpu, args: ['-t', '2'] } },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '-t', '2'],
    cpuEnv,
  ],
  [
    '--no-jinja in the profile: no --jinja',
    { profile: profile({ args: ['--no-jinja'] }) },
    [
      ...head,
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
      '--no-jinja',
    ],
    gpuEnv,
  ],
  [
    '--jinja in the profile: not twice',
    { profile: profile({ args: ['--jinja'] }) },
    [
      ...head,
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
      '--jinja',
    ],
    gpuEnv,
  ],
  [
    'served_model_name is the alias',
    { profile: profile({ served_model_name: 'qwen' }) },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'an alias the profile sets wins',
    { profile: profile({ args: ['-a', 'mine'] }) },
    [...head, '--jinja', '--parallel', '4', '--ctx-size', '32768', '--n-gpu-layers', '999', '-a', 'mine'],
    gpuEnv,
  ],
  [
    'the parallel setting, and the context for that many slots',
    { settings: { ...settings, llamacpp: { ...settings.llamacpp, parallel: 2 } } },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '2',
      '--ctx-size',
      '16384',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'an unset parallel setting is 4',
    { settings: { ...settings, llamacpp: { ...settings.llamacpp, parallel: 0 } } },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'slots the profile sets: theirs, and the context for them',
    { profile: profile({ args: ['-np', '8'] }) },
    [...head, '--jinja', '--alias', 'qwen-7b', '--ctx-size', '65536', '--n-gpu-layers', '999', '-np', '8'],
    gpuEnv,
  ],
  [
    'slots in the --flag=value spelling',
    { profile: profile({ args: ['--parallel=2'] }) },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--ctx-size',
      '16384',
      '--n-gpu-layers',
      '999',
      '--parallel=2',
    ],
    gpuEnv,
  ],
  [
    'automatic slots (-np -1, unified KV): each may use all of -c, so the context alone',
    { profile: profile({ args: ['-np', '-1'] }) },
    [...head, '--jinja', '--alias', 'qwen-7b', '--ctx-size', '8192', '--n-gpu-layers', '999', '-np', '-1'],
    gpuEnv,
  ],
  [
    'no context_length: the model file says',
    { model: { ...model, context_length: undefined } },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--n-gpu-layers', '999'],
    gpuEnv,
  ],
  [
    'a context the profile sets wins (-c)',
    { profile: profile({ args: ['-c', '4096'] }) },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--n-gpu-layers', '999', '-c', '4096'],
    gpuEnv,
  ],
  [
    'a context the profile sets wins (--ctx-size=)',
    { profile: profile({ args: ['--ctx-size=4096'] }) },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--n-gpu-layers', '999', '--ctx-size=4096'],
    gpuEnv,
  ],
  [
    'GPU layers the profile sets win (-ngl)',
    { profile: profile({ args: ['-ngl', '20'] }) },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '-ngl', '20'],
    gpuEnv,
  ],
  [
    'GPU layers the profile sets win (--gpu-layers=)',
    { profile: profile({ args: ['--gpu-layers=all'] }) },
    [...head, '--jinja', '--alias', 'qwen-7b', '--parallel', '4', '--ctx-size', '32768', '--gpu-layers=all'],
    gpuEnv,
  ],
  [
    'a split mode the profile sets wins',
    { devices: cards.slice(0, 2), profile: profile({ gpus_per_node: 2, args: ['-sm', 'row'] }) },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
      '-sm',
      'row',
    ],
    {
      CUDA_VISIBLE_DEVICES: `${cards[0]?.uuid},${cards[1]?.uuid}`,
      GGML_VK_VISIBLE_DEVICES: '0,1',
      LLAMA_API_KEY: apiKey,
    },
  ],
  [
    'adapters: each loaded at scale 0, in order, so adapter i is id i',
    {
      profile: profile({
        adapters: [
          { name: 'sql', path: '/adapters/sql.gguf' },
          { name: 'chat', path: '/adapters/chat.gguf' },
        ],
      }),
    },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
      '--lora-scaled',
      '/adapters/sql.gguf:0',
      '--lora-scaled',
      '/adapters/chat.gguf:0',
    ],
    gpuEnv,
  ],
  [
    'a split model in a directory: its first part, whatever order the files were read in',
    {
      weights: {
        path: '/models/big',
        files: ['big-00003-of-00003.gguf', 'README.md', 'big-00001-of-00003.gguf', 'big-00002-of-00003.gguf'],
      },
    },
    [
      '--model',
      '/models/big/big-00001-of-00003.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '18080',
      '--metrics',
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'a vision model: its projector beside it',
    { weights: { path: '/models/vl', files: ['mmproj-model-f16.gguf', 'Qwen2-VL-Q4_K_M.gguf'] } },
    [
      '--model',
      '/models/vl/Qwen2-VL-Q4_K_M.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '18080',
      '--metrics',
      '--jinja',
      '--alias',
      'qwen-7b',
      '--mmproj',
      '/models/vl/mmproj-model-f16.gguf',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'a fetched model: the file the agent names, with the projector it found',
    {
      weights: {
        path: '/data/models/hub/models--Qwen--VL/snapshots/abc/Qwen2-VL-Q4_K_M.gguf',
        projector: '/data/models/hub/models--Qwen--VL/snapshots/abc/mmproj-model-f16.gguf',
      },
    },
    [
      '--model',
      '/data/models/hub/models--Qwen--VL/snapshots/abc/Qwen2-VL-Q4_K_M.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '18080',
      '--metrics',
      '--jinja',
      '--alias',
      'qwen-7b',
      '--mmproj',
      '/data/models/hub/models--Qwen--VL/snapshots/abc/mmproj-model-f16.gguf',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    gpuEnv,
  ],
  [
    'a projector the profile sets wins (-mm)',
    {
      weights: { path: '/models/vl', files: ['mmproj-model-f16.gguf', 'Qwen2-VL-Q4_K_M.gguf'] },
      profile: profile({ args: ['-mm', '/other/mmproj.gguf'] }),
    },
    [
      '--model',
      '/models/vl/Qwen2-VL-Q4_K_M.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      '18080',
      '--metrics',
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
      '-mm',
      '/other/mmproj.gguf',
    ],
    gpuEnv,
  ],
  [
    'no key: no LLAMA_API_KEY',
    { apiKey: '' },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    { CUDA_VISIBLE_DEVICES: cards[0]?.uuid, GGML_VK_VISIBLE_DEVICES: '0' },
  ],
  [
    "the profile's environment, under llmgw's own",
    { profile: profile({ env: { LLAMA_ARG_FLASH_ATTN: 'on' } }) },
    [
      ...head,
      '--jinja',
      '--alias',
      'qwen-7b',
      '--parallel',
      '4',
      '--ctx-size',
      '32768',
      '--n-gpu-layers',
      '999',
    ],
    { LLAMA_ARG_FLASH_ATTN: 'on', ...gpuEnv },
  ],
];

describe('llama.cpp commands', () => {
  it.each(cases)('%s', (_what, over, args, env) => {
    const procs = llamacppEngine.commands(launch(over));
    expect(procs).toHaveLength(1);
    const [p] = procs;
    expect(p?.name).toBe('llama-server');
    expect(p?.bin).toBe(over.settings?.bin ?? settings.bin);
    expect(p?.args).toEqual(args);
    expect(p?.env).toEqual(env);
  });

  it('never puts the key on the command line, and never runs the CLI', () => {
    const [p] = llamacppEngine.commands(launch());
    expect(p?.args.join(' ')).not.toContain(apiKey);
    expect(p?.args).not.toContain('--api-key');
    // The executable is the runner's choice (settings.bin); what it falls back to is the server.
    expect(p?.bin).toBe(settings.bin);
    expect(llamacppEngine.defaultBin).toBe('llama-server');
    expect(llamacppEngine.imageExecutable).toMatch(/\/llama-server$/);
  });

  const refused: [string, ShardLaunch['weights'] | ShardLaunch['profile'], RegExp][] = [
    [
      'a directory with no .gguf',
      { path: '/models/hf', files: ['config.json', 'model.safetensors'] },
      /^\/models\/hf holds no \.gguf file: llamacpp serves GGUF weights, and it has config\.json, model\.safetensors; .*use engine: vllm or sglang/,
    ],
    [
      'an empty directory',
      { path: '/models/none', files: [] },
      /^\/models\/none holds no \.gguf file: llamacpp serves GGUF weights, and it is empty;/,
    ],
    [
      'a directory with only a projector',
      { path: '/models/vl', files: ['mmproj-model-f16.gguf'] },
      /^\/models\/vl holds a vision projector \(mmproj-model-f16\.gguf\) and no model: /,
    ],
  ];
  it.each(refused)('refuses %s with a message that says what to do', (_what, weights, message) => {
    let thrown: unknown;
    try {
      llamacppEngine.commands(launch({ weights: weights as ShardLaunch['weights'] }));
    } catch (e) {
      thrown = e;
    }
    expect(isLlmgwError(thrown) && thrown.code).toBe('invalid_argument');
    expect((thrown as Error).message).toMatch(message);
  });

  it('refuses an adapter path that --lora-scaled FILE:SCALE cannot carry', () => {
    expect(() =>
      llamacppEngine.commands(
        launch({ profile: profile({ adapters: [{ name: 'x', path: '/a:b/x.gguf' }] }) }),
      ),
    ).toThrow(/adapter "x" is at \/a:b\/x\.gguf.*keep adapters at a path without them/);
  });

  it('uses a file as it is', () => {
    expect(ggufIn({ path: '/m/x.gguf' })).toEqual({ model: '/m/x.gguf' });
  });
});

describe('llama.cpp validate', () => {
  const refusals: [string, Parameters<typeof profileOf>[1], typeof cards, string][] = [
    [
      'several nodes',
      { nodes: 2 },
      cards.slice(0, 1),
      'llamacpp does not span nodes: use engine: vllm or sglang for a 2-node replica',
    ],
    [
      'tp',
      { tp: 2, gpus_per_node: 2 },
      cards.slice(0, 2),
      "llamacpp splits a model across a node's GPUs by layer, not by tp or pp: write gpus_per_node: 2 instead",
    ],
    ['pp', { pp: 3, gpus_per_node: 3 }, cards.slice(0, 3), 'write gpus_per_node: 3 instead'],
    [
      'fewer cards than gpus_per_node',
      { gpus_per_node: 2 },
      cards.slice(0, 1),
      'profile "main" takes 2 GPU(s) per node (gpus_per_node: 2) but was given 1 (0): place it on 2 a100-80g device(s), or write gpus_per_node: 1',
    ],
    [
      'GPUs for a CPU profile',
      { cpu: true, gpu_class: undefined, gpus_per_node: 0 },
      cards.slice(0, 1),
      'profile "main" runs on CPUs (cpu: true) but was given GPU 0: place it on no GPU',
    ],
    [
      'a card twice',
      { gpus_per_node: 2 },
      [cards[0], cards[0]].filter((c) => c !== undefined),
      'device 0 was given twice',
    ],
  ];
  it.each(refusals)('refuses %s', (_what, over, devices, message) => {
    expect(llamacppEngine.validate(profile(over), devices).join('\n')).toContain(message);
  });

  it('accepts a CPU profile on no device, and one card per gpus_per_node', () => {
    expect(
      llamacppEngine.validate(profile({ cpu: true, gpu_class: undefined, gpus_per_node: 0 }), []),
    ).toEqual([]);
    expect(llamacppEngine.validate(profile({ gpus_per_node: 4 }), cards)).toEqual([]);
  });
});

describe('llama-server output', () => {
  it('reads --list-devices, skipping the log lines before it', () => {
    const out =
      'ggml_cuda_init: found 1 CUDA devices:\nAvailable devices:\n  CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free)\n';
    expect(parseListDevices(out)).toEqual(['CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free)']);
    expect(parseListDevices('Available devices:\n  (none)\n')).toEqual([]);
    expect(parseListDevices('')).toEqual([]);
  });

  it('reads --version', () => {
    expect(
      parseVersion(
        'version: 0.2.0-dev (build 10587, commit 3f545becc)\nbuilt with GNU 12.2.0 for Linux x86_64\n',
      ),
    ).toEqual({ build: 10587, commit: '3f545becc' });
    expect(parseVersion('nothing')).toBeUndefined();
  });
});
