import { describe, expect, it } from 'vitest';

import { fetchedWeights } from './shard-weights.js';

// Each engine chooses (Engine.fetchedWeights); these cases hold for every engine of the registry.
describe('what an engine is given of fetched files', () => {
  const origin = (...paths: string[]) => ({
    source: 'hf://org/m',
    kind: 'hf' as const,
    repo: 'org/m',
    revision: 'main',
    commit: 'a'.repeat(40),
    files: paths.map((path) => ({ path, size: 1 })),
  });
  const fetched = (o: ReturnType<typeof origin>) => ({
    snapshotDir: '/hub/snap',
    paths: Object.fromEntries(o.files.map((f) => [f.path, `/hub/snap/${f.path}`])),
  });

  it.each([
    [
      'the first part of a split GGUF, in the origin order, and its projector',
      ['Q4/m-00001-of-00002.gguf', 'Q4/m-00002-of-00002.gguf', 'mmproj-m-f16.gguf'],
      { path: '/hub/snap/Q4/m-00001-of-00002.gguf', projector: '/hub/snap/mmproj-m-f16.gguf' },
    ],
    [
      'a projector listed first is not the model',
      ['mmproj-m.gguf', 'm.gguf'],
      { path: '/hub/snap/m.gguf', projector: '/hub/snap/mmproj-m.gguf' },
    ],
    ['no projector', ['README.md', 'm.gguf'], { path: '/hub/snap/m.gguf' }],
  ])('llama.cpp: %s', (_what, paths, expected) => {
    const o = origin(...paths);
    expect(fetchedWeights('llamacpp', o, fetched(o))).toEqual(expected);
  });

  it('llama.cpp: refuses files with no GGUF model, saying what to do', () => {
    const o = origin('config.json', 'model.safetensors');
    expect(() => fetchedWeights('llamacpp', o, fetched(o))).toThrow(
      'hf://org/m has no GGUF model file (config.json, model.safetensors): llamacpp serves GGUF weights; name a .gguf file of it, or use engine: vllm or sglang',
    );
  });

  it.each(['vllm', 'sglang', 'trtllm'] as const)('%s: the snapshot directory', (engine) => {
    const o = origin('config.json', 'model.safetensors');
    expect(fetchedWeights(engine, o, fetched(o))).toEqual({ path: '/hub/snap' });
  });
});
