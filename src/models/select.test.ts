import { describe, expect, it } from 'vitest';
import { type TreeFile, selectFiles } from './select.js';

const f = (path: string, size = 100): TreeFile => ({ path, size, oid: 'o', lfs: { oid: 's', size } });
const at = 'main (commit abc)';
const label = 'hf://org/repo';
const paths = (files: TreeFile[]) => files.map((x) => x.path);

const gguf = [
  f('README.md'),
  f('M-Q4_K_M.gguf', 4_700_000_000),
  f('M-Q8_0.gguf', 8_500_000_000),
  f('M-F16-00001-of-00002.gguf', 9_000_000_000),
  f('M-F16-00002-of-00002.gguf', 7_000_000_000),
  f('mmproj-M-F32.gguf'),
  f('mmproj-M-F16.gguf'),
];

const sharded = [
  f('README.md'),
  f('config.json'),
  f('generation_config.json'),
  f('tokenizer.json'),
  f('tokenizer_config.json'),
  f('special_tokens_map.json'),
  f('params.json'),
  f('consolidated.safetensors'),
  f('model-00001-of-00002.safetensors'),
  f('model-00002-of-00002.safetensors'),
  f('model.safetensors.index.json'),
  f('original/consolidated.00.pth'),
];

describe('selectFiles', () => {
  it.each([
    [
      'one GGUF brings the F16 mmproj',
      gguf,
      'M-Q4_K_M.gguf',
      undefined,
      ['M-Q4_K_M.gguf', 'mmproj-M-F16.gguf'],
    ],
    [
      'a split GGUF brings all its parts',
      gguf,
      'M-F16-00001-of-00002.gguf',
      undefined,
      ['M-F16-00001-of-00002.gguf', 'M-F16-00002-of-00002.gguf', 'mmproj-M-F16.gguf'],
    ],
    [
      'a GGUF without a projector comes alone',
      [f('a/x.gguf'), f('b.gguf')],
      'a/x.gguf',
      undefined,
      ['a/x.gguf'],
    ],
    [
      'a projector in the same folder is preferred',
      [f('a/x.gguf'), f('mmproj-F16.gguf'), f('a/mmproj-Q8_0.gguf')],
      'a/x.gguf',
      undefined,
      ['a/x.gguf', 'a/mmproj-Q8_0.gguf'],
    ],
    ['a named non-GGUF file comes alone', sharded, 'config.json', undefined, ['config.json']],
    [
      'sharded safetensors: companions, index, shards; never consolidated',
      sharded,
      undefined,
      undefined,
      [
        'config.json',
        'generation_config.json',
        'tokenizer.json',
        'tokenizer_config.json',
        'special_tokens_map.json',
        'model.safetensors.index.json',
        'model-00001-of-00002.safetensors',
        'model-00002-of-00002.safetensors',
      ],
    ],
    [
      'the shards the index names',
      [...sharded, f('model-extra.safetensors')],
      undefined,
      ['model-extra.safetensors', 'model-00001-of-00002.safetensors', 'model-extra.safetensors'],
      [
        'config.json',
        'generation_config.json',
        'tokenizer.json',
        'tokenizer_config.json',
        'special_tokens_map.json',
        'model.safetensors.index.json',
        'model-00001-of-00002.safetensors',
        'model-extra.safetensors',
      ],
    ],
    [
      'a single model.safetensors',
      [f('config.json'), f('model.safetensors'), f('tokenizer.model')],
      undefined,
      undefined,
      ['config.json', 'tokenizer.model', 'model.safetensors'],
    ],
    [
      'only consolidated weights are taken when there is nothing else',
      [f('config.json'), f('consolidated.safetensors')],
      undefined,
      undefined,
      ['config.json', 'consolidated.safetensors'],
    ],
  ])('%s', (_name, tree, file, indexFiles, want) => {
    const input = { label, at, tree, ...(file ? { file } : {}), ...(indexFiles ? { indexFiles } : {}) };
    expect(paths(selectFiles(input))).toEqual(want);
  });

  it.each([
    [
      'a GGUF repository without a file',
      gguf,
      undefined,
      'invalid_argument',
      'hf://org/repo holds GGUF files: name one file: hf://org/repo/FILE; this repository has: ' +
        'M-F16-00001-of-00002.gguf (16.0 GB), M-Q4_K_M.gguf (4.7 GB), M-Q8_0.gguf (8.5 GB)',
    ],
    [
      'a missing file',
      gguf,
      'M-Q2_K.gguf',
      'not_found',
      'hf://org/repo has no file M-Q2_K.gguf at main (commit abc)',
    ],
    [
      'a missing split part',
      [f('M-00001-of-00003.gguf'), f('M-00003-of-00003.gguf')],
      'M-00001-of-00003.gguf',
      'not_found',
      'hf://org/repo has no part M-00002-of-00003.gguf of the split GGUF M-00001-of-00003.gguf at main (commit abc)',
    ],
    [
      'a repository with neither GGUF nor safetensors',
      [f('config.json'), f('pytorch_model.bin')],
      undefined,
      'invalid_argument',
      'hf://org/repo has no GGUF or safetensors files at main (commit abc): llmgw serves one of those; name a repository that has them',
    ],
  ])('refuses %s', (_name, tree, file, code, message) => {
    const input = { label, at, tree, ...(file ? { file } : {}) };
    expect(() => selectFiles(input)).toThrow(expect.objectContaining({ code, message }));
  });
});
