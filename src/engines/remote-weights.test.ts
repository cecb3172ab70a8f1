import { describe, expect, it } from 'vitest';

import { launch } from './engine.contract.js';
import { engineFor } from './registry.js';

describe('weights the engine downloads itself', () => {
  it.each([
    [
      'a Hugging Face file',
      { hf: 'Qwen/Qwen2.5-0.5B-Instruct-GGUF', file: 'qwen2.5-0.5b-instruct-q4_k_m.gguf' },
      ['--hf-repo', 'Qwen/Qwen2.5-0.5B-Instruct-GGUF', '--hf-file', 'qwen2.5-0.5b-instruct-q4_k_m.gguf'],
    ],
    [
      'a Hugging Face repository (its default quantisation)',
      { hf: 'ggml-org/gemma-3-1b-it-GGUF' },
      ['--hf-repo', 'ggml-org/gemma-3-1b-it-GGUF'],
    ],
    [
      'a URL',
      { url: 'https://models.example.org/tiny.gguf' },
      ['--model-url', 'https://models.example.org/tiny.gguf'],
    ],
  ])('llama.cpp: %s', (_what, weights, expected) => {
    const [p] = engineFor('llamacpp').commands(launch('llamacpp', { weights }));
    expect(p?.args.slice(0, expected.length)).toEqual(expected);
    expect(p?.args).not.toContain('--model');
  });

  it.each(['vllm', 'sglang', 'trtllm'] as const)('%s: a repository is passed by its id', (name) => {
    const [p] = engineFor(name).commands(launch(name, { weights: { hf: 'Qwen/Qwen2.5-7B-Instruct' } }));
    expect(p?.args).toContain('Qwen/Qwen2.5-7B-Instruct');
  });

  it.each(['vllm', 'sglang', 'trtllm'] as const)(
    '%s: refuses one file of a repository, and a URL, saying what to write',
    (name) => {
      expect(() =>
        engineFor(name).commands(launch(name, { weights: { hf: 'Qwen/X-GGUF', file: 'x.gguf' } })),
      ).toThrow(
        `${name} loads a whole repository, not one file of it: write source: hf://Qwen/X-GGUF (without /x.gguf), or use engine: llamacpp for a GGUF file`,
      );
      expect(() => engineFor(name).commands(launch(name, { weights: { url: 'https://x/y' } }))).toThrow(
        `${name} cannot download weights from a URL (https://x/y): write source: hf://ORG/REPO, or a path on the nodes`,
      );
    },
  );
});
