import { describe, expect, it } from 'vitest';

import { contextProblem, MAX_CONTEXT, MIN_CONTEXT } from './context-bounds.js';
import { engines } from '../../test/support/engines.js';
import { validateModel as validateWith, validateModels as validateAllWith } from './validate.js';

// The catalog is given the engines it checks against: the registry's, as the control plane gives them.
const validateModel = (input: unknown) => validateWith(input, engines);
const validateModels = (input: readonly unknown[]) => validateAllWith(input, engines);

const model = (context_length: unknown) => ({
  name: 'qwen',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length,
  profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' }],
});

describe('one bound on a context', () => {
  const refused: [unknown, string][] = [
    [1_000_000_000_000, '1000000000000'],
    [MAX_CONTEXT + 1, '16777217'],
    [MIN_CONTEXT - 1, '255'],
    [0, '0'],
    [-4096, '-4096'],
    [8192.5, '8192.5'],
    ['8k', '"8k"'],
    [true, 'true'],
  ];

  it.each(refused)('refuses %j with the same words wherever it is written', (tokens, shown) => {
    const words = `a context is a whole number of tokens from 256 to 16777216, not ${shown}`;
    expect(contextProblem(tokens)).toBe(words);
    // A model as the API and llmgw ctl model add take it, and as the settings file's models: holds it.
    const one = validateModel(model(tokens));
    expect(one.ok ? [] : one.issues).toEqual([{ path: ['context_length'], message: words }]);
    expect(validateModels([model(tokens)]).issues).toEqual([{ path: [0, 'context_length'], message: words }]);
  });

  it.each([MIN_CONTEXT, 32_768, MAX_CONTEXT])('takes %i tokens', (tokens) => {
    expect(contextProblem(tokens)).toBeUndefined();
    expect(validateModel(model(tokens)).ok).toBe(true);
  });

  it('bounds max_output by the longest context too', () => {
    const r = validateModel({ ...model(undefined), max_output: MAX_CONTEXT + 1 });
    expect(r.ok ? [] : r.issues).toEqual([
      { path: ['max_output'], message: 'must be at most 16777216, got 16777217' },
    ]);
  });
});
