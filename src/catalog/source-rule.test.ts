import { describe, expect, it } from 'vitest';

import { adapterPathProblem, sourceProblem } from './source-rule.js';
import { engines } from '../../test/support/engines.js';
import { validateModel as validateWith } from './validate.js';

// The catalog is given the engines it checks against: the registry's, as the control plane gives them.
const validateModel = (input: unknown) => validateWith(input, engines);

const model = (adapterPath: string) => ({
  name: 'chat',
  source: '/models/chat',
  profiles: [
    { name: 'l4', engine: 'vllm', gpu_class: 'l4-24g', adapters: [{ name: 'sql', path: adapterPath }] },
  ],
});

describe('adapterPathProblem', () => {
  it.each(['/adapters/sql', '/models/loras/sql-lora.gguf', '/adapters/sql/'])('takes %s', (path) => {
    expect(adapterPathProblem({ name: 'sql', path })).toBeUndefined();
    expect(validateModel(model(path)).ok).toBe(true);
  });

  it.each([
    [
      '../../etc/passwd',
      '"../../etc/passwd" is a relative path: write an absolute path, as the agents see it on each node (e.g. /adapters/sql)',
    ],
    [
      'sql.gguf',
      '"sql.gguf" is a relative path: write an absolute path, as the agents see it on each node (e.g. /adapters/sql)',
    ],
    [
      'yard1/llama-2-7b-sql-lora',
      '"yard1/llama-2-7b-sql-lora" is a relative path: write an absolute path, as the agents see it on each node (e.g. /adapters/sql)',
    ],
    [
      '~/sql',
      '"~/sql" is a relative path: write an absolute path, as the agents see it on each node (e.g. /adapters/sql)',
    ],
    ['/adapters/../etc/passwd', '"/adapters/../etc/passwd" has ".." in it: write the path without it'],
    [
      'hf://yard1/llama-2-7b-sql-lora',
      `"hf://yard1/llama-2-7b-sql-lora" is not a path on the nodes: llmgw fetches a model's source, not its adapters; put the adapter's files at the same absolute path on every node and write that path (e.g. /adapters/sql)`,
    ],
    [
      'https://example.com/sql.gguf',
      `"https://example.com/sql.gguf" is not a path on the nodes: llmgw fetches a model's source, not its adapters; put the adapter's files at the same absolute path on every node and write that path (e.g. /adapters/sql)`,
    ],
  ])('refuses %s, saying what to write, at the adapter path', (path, message) => {
    expect(adapterPathProblem({ name: 'sql', path })).toBe(message);
    expect(validateModel(model(path))).toEqual({
      ok: false,
      issues: [{ path: ['profiles', 0, 'adapters', 0, 'path'], message }],
    });
  });
});

describe('sourceProblem', () => {
  it.each([
    [
      'models/x.gguf',
      '"models/x.gguf" is a relative path: write an absolute path, as the agents see it on each node (e.g. /models/models/x.gguf)',
    ],
    [
      '../../etc/passwd',
      '"../../etc/passwd" is a relative path: write an absolute path, as the agents see it on each node (e.g. /models/etc/passwd)',
    ],
    ['huggingface.co/Qwen/Qwen2.5-7B', 'write the Hugging Face repository as "hf://Qwen/Qwen2.5-7B"'],
    [
      '/models/../etc/shadow',
      'model source "/models/../etc/shadow" has ".." in it: write the path without it',
    ],
  ])('refuses %s', (source, message) => {
    expect(sourceProblem(source)).toBe(message);
  });
});
