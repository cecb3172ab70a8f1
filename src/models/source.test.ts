import { describe, expect, it } from 'vitest';
import { formatSize, parseSource } from './source.js';

describe('parseSource', () => {
  it.each([
    ['hf://Qwen/Qwen2.5-7B-Instruct', { kind: 'hf', repo: 'Qwen/Qwen2.5-7B-Instruct', revision: 'main' }],
    [
      'hf://bartowski/Llama-3.1-8B-GGUF/Llama-3.1-8B-Q4_K_M.gguf',
      { kind: 'hf', repo: 'bartowski/Llama-3.1-8B-GGUF', file: 'Llama-3.1-8B-Q4_K_M.gguf', revision: 'main' },
    ],
    [
      'hf://org/repo/sub/dir/x.gguf@v1.0',
      { kind: 'hf', repo: 'org/repo', file: 'sub/dir/x.gguf', revision: 'v1.0' },
    ],
    ['hf://org/repo@refs/pr/1', { kind: 'hf', repo: 'org/repo', revision: 'refs/pr/1' }],
    ['  https://example.com/m.gguf  ', { kind: 'url', url: 'https://example.com/m.gguf' }],
    ['http://10.0.0.1:8080/a/b.gguf', { kind: 'url', url: 'http://10.0.0.1:8080/a/b.gguf' }],
    ['/models/llama/', { kind: 'path', path: '/models/llama/' }],
    ['/models//x.gguf', { kind: 'path', path: '/models/x.gguf' }],
  ])('reads %s', (source, want) => {
    expect(parseSource(source)).toEqual(want);
  });

  it.each([
    [
      '',
      'a model source is empty: write hf://ORG/REPO[/FILE][@REVISION], an http(s) URL, or an absolute path',
    ],
    [
      'hf://onlyorg',
      'model source "hf://onlyorg" does not name a repository: write hf://ORG/REPO, for example hf://Qwen/Qwen2.5-7B-Instruct',
    ],
    [
      'hf://org/repo@',
      'model source "hf://org/repo@" has an empty revision after @: name a branch, tag or commit',
    ],
    [
      'hf://org/repo/../x.gguf',
      'model source "hf://org/repo/../x.gguf" has an empty, "." or ".." part in its file path',
    ],
    [
      'https://user:pw@example.com/m.gguf',
      'model source "https://user:pw@example.com/m.gguf" carries a user name or password: put no secret in a model source',
    ],
    [
      's3://bucket/m.gguf',
      'model source "s3://bucket/m.gguf" has a scheme llmgw does not read: write hf://ORG/REPO[/FILE][@REVISION], an http(s) URL, or an absolute path',
    ],
    [
      'Qwen/Qwen2.5-7B',
      'model source "Qwen/Qwen2.5-7B" is not one llmgw reads: for a Hugging Face repository write hf://Qwen/Qwen2.5-7B',
    ],
    [
      'models/x.gguf.',
      'model source "models/x.gguf." is not one llmgw reads: for a Hugging Face repository write hf://models/x.gguf.',
    ],
    [
      'relative.gguf',
      'model source "relative.gguf" is not one llmgw reads: write hf://ORG/REPO[/FILE][@REVISION], an http(s) URL, or an absolute path',
    ],
    ['/models/../etc', 'model source "/models/../etc" has ".." in it: write the path without it'],
  ])('refuses %j', (source, message) => {
    expect(() => parseSource(source)).toThrow(message);
    try {
      parseSource(source);
    } catch (e) {
      expect(e).toMatchObject({ code: 'invalid_argument', message });
    }
  });
});

describe('formatSize', () => {
  it.each([
    [4_683_073_248, '4.7 GB'],
    [512_000_000, '512 MB'],
    [12_345, '12 kB'],
    [10, '10 B'],
  ])('%d bytes is %s', (bytes, want) => {
    expect(formatSize(bytes)).toBe(want);
  });
});
