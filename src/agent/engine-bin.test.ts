import { describe, expect, it } from 'vitest';

import { testEngines } from '../../test/support/assignments.js';
import { engines } from '../engines/registry.js';
import type { Engine } from '../engines/types.js';

import { engineBin } from './engine-bin.js';

const sent = { ...testEngines(), vllm: { bin: '/opt/vllm/bin/vllm' } };
const byName = (name: string): Engine => {
  const e = engines.find((x) => x.name === name);
  if (e === undefined) throw new Error(name);
  return e;
};
// An engine llmgw knows only through its folder: no settings key, no line here.
const fifth = {
  name: 'tgi',
  installedByAgent: false,
  defaultBin: 'text-generation-launcher',
  imageExecutable: 'tgi',
};

describe('the executable a shard runs', () => {
  const cases: [string, Parameters<typeof engineBin>[0], string][] = [
    [
      'a container: the one in its image',
      { engine: byName('vllm'), container: true, installed: undefined, local: { vllm: '/x' }, sent },
      'vllm',
    ],
    [
      'an installed engine: the agent’s build',
      {
        engine: byName('llamacpp'),
        container: false,
        installed: '/data/llama/llama-server',
        local: {},
        sent,
      },
      '/data/llama/llama-server',
    ],
    [
      'an installed engine, none chosen yet: its usual name',
      { engine: byName('llamacpp'), container: false, installed: undefined, local: {}, sent },
      'llama-server',
    ],
    [
      'the node’s own setting first',
      { engine: byName('vllm'), container: false, installed: undefined, local: { vllm: '/node/vllm' }, sent },
      '/node/vllm',
    ],
    [
      'then the control plane’s',
      { engine: byName('vllm'), container: false, installed: undefined, local: {}, sent },
      '/opt/vllm/bin/vllm',
    ],
    [
      'the control plane’s for another engine',
      {
        engine: byName('sglang'),
        container: false,
        installed: undefined,
        local: { vllm: '/node/vllm' },
        sent,
      },
      'python3',
    ],
    [
      'an engine no settings name: its usual name',
      { engine: fifth, container: false, installed: undefined, local: {}, sent },
      'text-generation-launcher',
    ],
    [
      'an engine no settings name, in a container',
      { engine: fifth, container: true, installed: undefined, local: {}, sent },
      'tgi',
    ],
  ];
  it.each(cases)('%s', (_what, o, bin) => {
    expect(engineBin(o)).toBe(bin);
  });
});
