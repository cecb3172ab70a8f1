import { describe, expect, it } from 'vitest';

import { diffJson } from './diff.js';
import { didYouMean } from './did-you-mean.js';
import { formatPath } from './errors.js';
import { dnsLabelProblem, toDnsLabel } from './names.js';
import { redact } from './redact.js';
import { generateSecret, hashSecret, secretPrefix } from './secrets.js';

describe('core', () => {
  it('redacts keys, tokens, bearer headers and URL passwords', () => {
    const key = generateSecret('key');
    const join = generateSecret('join');
    expect(redact(`key ${key} token ${join}`)).toBe('key llmgw_key_[redacted] token llmgw_join_[redacted]');
    expect(redact('Authorization: Bearer abcdefghijklmnop')).toBe('Authorization: Bearer [redacted]');
    expect(redact('send "Authorization: Bearer KEY"')).toBe('send "Authorization: Bearer KEY"');
    expect(redact('postgres://llmgw:hunter2@db:5432/llmgw')).toBe('postgres://llmgw:[redacted]@db:5432/llmgw');
  });

  it('makes distinct secrets, hashes them stably, and shows only a prefix', () => {
    const a = generateSecret('key');
    expect(a).not.toBe(generateSecret('key'));
    expect(hashSecret(a)).toBe(hashSecret(a));
    expect(hashSecret(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(secretPrefix(a)).toBe(`${a.slice(0, 14)}...`);
  });

  it('suggests close words only', () => {
    expect(didYouMean('gpu_clas', ['gpu_class', 'tp'])).toBe('gpu_class');
    expect(didYouMean('zzz', ['gpu_class', 'tp'])).toBeUndefined();
  });

  it('names DNS labels and their nearest valid form', () => {
    expect(dnsLabelProblem('model name', 'ok-name')).toBeUndefined();
    expect(toDnsLabel('--Qwen2.5__7B--')).toBe('qwen2-5-7b');
    expect(toDnsLabel('x'.repeat(80))).toHaveLength(63);
  });

  it('diffs JSON path by path', () => {
    expect(diffJson({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 3] }, d: 'x' })).toEqual([
      { path: 'b.c[1]', before: 2, after: 3 },
      { path: 'd', after: 'x' },
    ]);
    expect(formatPath(['models', 0, 'profiles', 1, 'tp'])).toBe('models[0].profiles[1].tp');
  });
});
