import { describe, expect, it } from 'vitest';

import { launch } from './engine.contract.js';
import { engineFor } from './registry.js';

// Engines never download: each is given the files the agent put on the node.
describe('weights on the node', () => {
  it('llama.cpp: the model file, never a repository or URL flag', () => {
    const [p] = engineFor('llamacpp').commands(
      launch('llamacpp', { weights: { path: '/cache/snapshots/abc/model-00001-of-00002.gguf' } }),
    );
    expect(p?.args.slice(0, 2)).toEqual(['--model', '/cache/snapshots/abc/model-00001-of-00002.gguf']);
    for (const flag of ['--hf-repo', '--hf-file', '--model-url', '-hf', '-mu'])
      expect(p?.args).not.toContain(flag);
  });

  it.each(['vllm', 'sglang', 'trtllm'] as const)('%s: the snapshot directory as the model', (name) => {
    const [p] = engineFor(name).commands(launch(name, { weights: { path: '/cache/snapshots/abc' } }));
    expect(p?.args).toContain('/cache/snapshots/abc');
    expect(p?.args.filter((a) => a.includes('/')).filter((a) => a.startsWith('/cache'))).toEqual([
      '/cache/snapshots/abc',
    ]);
  });
});
