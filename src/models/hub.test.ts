import { describe, expect, it } from 'vitest';
import { hubAccess } from './hub.js';

describe('hubAccess', () => {
  it.each([
    [{}, {}, { endpoint: 'https://huggingface.co' }],
    [{}, { HF_ENDPOINT: 'https://hf-mirror.com/' }, { endpoint: 'https://hf-mirror.com' }],
    [
      { endpoint: 'http://mirror.lan:8080' },
      { HF_ENDPOINT: 'https://hf-mirror.com' },
      { endpoint: 'http://mirror.lan:8080' },
    ],
    [{}, { HF_TOKEN: 'hf_env' }, { endpoint: 'https://huggingface.co', token: 'hf_env' }],
    [{ token: 'hf_set' }, { HF_TOKEN: 'hf_env' }, { endpoint: 'https://huggingface.co', token: 'hf_set' }],
    [{ token: '  ' }, { HF_ENDPOINT: '' }, { endpoint: 'https://huggingface.co' }],
  ])('settings %j and environment %j give %j', (settings, env, want) => {
    expect(hubAccess(settings, env)).toEqual(want);
  });

  it.each([
    [
      { endpoint: 'huggingface.co' },
      {},
      'hub.endpoint "huggingface.co" is not an address: write one like https://huggingface.co',
    ],
    [
      {},
      { HF_ENDPOINT: 'ftp://x' },
      'HF_ENDPOINT "ftp://x" is not an http(s) address: write one like https://huggingface.co',
    ],
    [
      { endpoint: 'https://u:p@hub.lan' },
      {},
      'hub.endpoint carries a user name or password: put the token in hub.token instead',
    ],
  ])('refuses settings %j and environment %j', (settings, env, message) => {
    expect(() => hubAccess(settings, env)).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message }),
    );
  });
});
