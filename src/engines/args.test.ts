import { describe, expect, it } from 'vitest';

import { flagValue, hasFlag, unlessSet } from './args.js';

describe('profile flags', () => {
  const cases: [string, string[], string[], boolean, string | undefined][] = [
    ['--flag value', ['--parallel', '2'], ['--parallel', '-np'], true, '2'],
    ['--flag=value', ['--parallel=2'], ['--parallel', '-np'], true, '2'],
    ['a short alias', ['-np', '8'], ['--parallel', '-np'], true, '8'],
    ['a flag alone', ['--jinja'], ['--jinja'], true, undefined],
    ['the last of several', ['-c', '1', '--ctx-size=2', '-c', '3'], ['--ctx-size', '-c'], true, '3'],
    ['not a prefix of another flag', ['-ts', '1,1'], ['-t'], false, undefined],
    ['not a longer flag', ['--parallel-x', '2'], ['--parallel'], false, undefined],
    ['a value after =, kept whole', ['--lora-modules=a=/p'], ['--lora-modules'], true, 'a=/p'],
    ['absent', ['--metrics'], ['--port'], false, undefined],
  ];
  it.each(cases)('reads %s', (_what, args, names, has, value) => {
    expect(hasFlag(args, ...names)).toBe(has);
    expect(flagValue(args, ...names)).toBe(value);
  });

  it('writes a flag only where the profile is silent', () => {
    expect(unlessSet([], ['--max-model-len'], 8192)).toEqual(['--max-model-len', '8192']);
    expect(unlessSet(['--max-model-len=4096'], ['--max-model-len'], 8192)).toEqual([]);
  });
});
