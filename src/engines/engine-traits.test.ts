import { describe, expect, it } from 'vitest';

import { engineFor } from './registry.js';

/** What the fleet, the cli and the agent read of each engine, as they read it before it moved here. */
describe("each engine's traits", () => {
  const capacities: [string, string[], number][] = [
    // llama.cpp's slots: its --parallel, else the node's setting (here 6).
    ['llamacpp', [], 6],
    ['llamacpp', ['--parallel', '3'], 3],
    ['llamacpp', ['-np=2'], 2],
    ['llamacpp', ['--parallel', '-1'], 6],
    ['vllm', [], 256],
    ['vllm', ['--max-num-seqs', '64'], 64],
    ['sglang', [], 256],
    ['sglang', ['--max-running-requests=32'], 32],
    ['trtllm', [], 256],
    ['trtllm', ['--max_batch_size', '8'], 8],
    ['vllm', ['--max-num-seqs', 'many'], 256],
  ];
  it.each(capacities)('%s %j computes %i requests at once', (name, args, capacity) => {
    expect(engineFor(name).capacity(args, 6)).toBe(capacity);
  });

  const traits: [string, Record<string, unknown>][] = [
    [
      'llamacpp',
      { label: 'llama.cpp', runsOnCpu: true, formats: ['gguf'], split: 'layer', defaultBin: 'llama-server' },
    ],
    [
      'vllm',
      { label: 'vLLM', runsOnCpu: false, formats: ['safetensors'], split: 'tensor', defaultBin: 'vllm' },
    ],
    [
      'sglang',
      { label: 'SGLang', runsOnCpu: false, formats: ['safetensors'], split: 'tensor', defaultBin: 'python3' },
    ],
    [
      'trtllm',
      {
        label: 'TensorRT-LLM',
        runsOnCpu: false,
        formats: ['safetensors'],
        split: 'tensor',
        defaultBin: 'trtllm-serve',
      },
    ],
  ];
  it.each(traits)('%s: %j', (name, expected) => {
    expect(engineFor(name)).toMatchObject(expected);
  });

  it('writes a context where its args can, and says why where they cannot', () => {
    expect(engineFor('llamacpp').context).toEqual({ flags: ['--ctx-size', '-c'] });
    expect(engineFor('vllm').context).toEqual({ flags: ['--max-model-len', '--max_model_len'] });
    expect(engineFor('sglang').context).toEqual({ flags: ['--context-length'] });
    expect(engineFor('trtllm').context).toHaveProperty('fixed');
  });

  it('refuses a context past the trained one in its own words, where it does', () => {
    expect(engineFor('vllm').pastTrained?.(40000, 32768)).toBe(
      'User-specified max_model_len (40000) is greater than the derived max_model_len',
    );
    expect(engineFor('sglang').pastTrained?.(40000, 32768)).toBe(
      'User-specified context_length (40000) is greater than the derived context_length (32768)',
    );
    // llama.cpp and TensorRT-LLM warn, and start.
    expect('pastTrained' in engineFor('llamacpp')).toBe(false);
    expect('pastTrained' in engineFor('trtllm')).toBe(false);
  });

  it('llama.cpp refuses more cards with --split-mode none, and its split across nodes or by tp', () => {
    const llama = engineFor('llamacpp');
    expect(llama.cardsProblem?.(['-sm', 'none'], 2)).toMatch(/^llama\.cpp with --split-mode none/);
    expect(llama.cardsProblem?.(['-sm', 'none'], 1)).toBeUndefined();
    expect(llama.cardsProblem?.(['-sm', 'row'], 2)).toBeUndefined();
    expect(llama.splitProblems?.({ tp: 2, pp: 1, nodes: 2 }).map((p) => p.key)).toEqual(['nodes', 'tp']);
    expect('splitProblems' in engineFor('vllm')).toBe(false);
  });
});
