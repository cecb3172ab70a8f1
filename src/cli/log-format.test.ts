import { describe, expect, it } from 'vitest';

import { chooseLogFormat, logFormatEnv, useLogFormat } from './log-format.js';
import { UsageError } from './usage-error.js';

describe('chooseLogFormat', () => {
  it.each([
    { why: 'a terminal, nothing said', c: { isTTY: true }, want: 'pretty' },
    { why: 'a pipe or file, nothing said', c: { isTTY: false }, want: 'json' },
    { why: 'the flag over the terminal', c: { flag: 'json', isTTY: true }, want: 'json' },
    { why: 'the flag over a pipe', c: { flag: 'pretty', isTTY: false }, want: 'pretty' },
    { why: 'the environment over the terminal', c: { env: 'json', isTTY: true }, want: 'json' },
    { why: 'the environment over a pipe', c: { env: 'pretty', isTTY: false }, want: 'pretty' },
    { why: 'the flag over the environment', c: { flag: 'json', env: 'pretty', isTTY: true }, want: 'json' },
    { why: 'an empty variable is unset', c: { env: '', isTTY: false }, want: 'json' },
  ] as const)('$why: $want', ({ c, want }) => {
    expect(chooseLogFormat(c)).toBe(want);
  });

  it('refuses a flag that is not a format, naming the choices', () => {
    const f = () => chooseLogFormat({ flag: 'yaml', env: 'json', isTTY: true });
    expect(f).toThrow(UsageError);
    expect(f).toThrow('--log-format yaml is not a log format: give json or pretty');
  });

  it('refuses a variable that is not a format, naming it and the choices', () => {
    const f = () => chooseLogFormat({ env: 'text', isTTY: false });
    expect(f).toThrow(UsageError);
    expect(f).toThrow('LLMGW_LOG_FORMAT=text is not a log format: set it to json or pretty, or unset it');
  });
});

describe('useLogFormat', () => {
  it('records the format in the environment, for createLogger and the worker processes', () => {
    const env: NodeJS.ProcessEnv = {};
    expect(useLogFormat({}, env, true)).toBe('pretty');
    expect(env[logFormatEnv]).toBe('pretty');
    const piped: NodeJS.ProcessEnv = {};
    expect(useLogFormat({}, piped, false)).toBe('json');
    expect(piped[logFormatEnv]).toBe('json');
  });

  it('takes --log-format (commander camel-cases it) over the environment', () => {
    const env: NodeJS.ProcessEnv = { [logFormatEnv]: 'pretty' };
    expect(useLogFormat({ logFormat: 'json' }, env, true)).toBe('json');
    expect(env[logFormatEnv]).toBe('json');
  });

  it('leaves the environment alone when it refuses', () => {
    const env: NodeJS.ProcessEnv = { [logFormatEnv]: 'pretty' };
    expect(() => useLogFormat({ logFormat: 'xml' }, env, true)).toThrow(
      '--log-format xml is not a log format',
    );
    expect(env[logFormatEnv]).toBe('pretty');
  });
});
