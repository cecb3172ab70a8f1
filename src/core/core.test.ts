import { describe, expect, it } from 'vitest';

import { bearerToken } from './bearer.js';
import { diffJson } from './diff.js';
import { didYouMean, didYouMeanMaxLength } from './did-you-mean.js';
import { formatPath } from './errors.js';
import { dnsLabelProblem, toDnsLabel } from './names.js';
import { clientText, redact } from './redact.js';
import { requestIdFrom, validRequestId } from './request-id.js';
import { generateSecret, hashSecret, secretPrefix } from './secrets.js';

describe('core', () => {
  it('redacts keys, tokens, bearer headers and URL passwords', () => {
    const key = generateSecret('key');
    const join = generateSecret('join');
    expect(redact(`key ${key} token ${join}`)).toBe('key llmgw_key_[redacted] token llmgw_join_[redacted]');
    expect(redact('Authorization: Bearer abcdefghijklmnop')).toBe('Authorization: Bearer [redacted]');
    expect(redact('send "Authorization: Bearer KEY"')).toBe('send "Authorization: Bearer KEY"');
    expect(redact('postgres://llmgw:hunter2@db:5432/llmgw')).toBe(
      'postgres://llmgw:[redacted]@db:5432/llmgw',
    );
  });

  it('makes distinct secrets, hashes them stably, and shows only a prefix', () => {
    const a = generateSecret('key');
    expect(a).not.toBe(generateSecret('key'));
    expect(hashSecret(a)).toBe(hashSecret(a));
    expect(hashSecret(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(secretPrefix(a)).toBe(`${a.slice(0, 14)}...`);
  });

  it('redacts a key glued to other text, as a model name or a path may carry it', () => {
    const key = generateSecret('key');
    expect(redact(`/v1/x${key}`)).toBe('/v1/xllmgw_key_[redacted]');
    expect(redact(`model_${key}_suffix`)).toBe('model_llmgw_key_[redacted]');
  });

  it("cuts a client's values short and redacts them, for logs and messages", () => {
    const key = generateSecret('key');
    expect(clientText('chat')).toBe('chat');
    expect(clientText(key)).toBe('llmgw_key_[redacted]');
    const huge = 'a'.repeat(1024 * 1024);
    expect(clientText(huge)).toBe(`${'a'.repeat(200)}…(1048576 characters)`);
    expect(clientText(huge, 10)).toBe('aaaaaaaaaa…(1048576 characters)');
    // A key straddling the cut is redacted, not shown in part.
    const straddling = clientText(`${'x'.repeat(195)}${key}${'y'.repeat(1000)}`);
    expect(straddling).not.toContain(key.slice(10, 18));
    expect(straddling.startsWith(`${'x'.repeat(195)}llmgw`)).toBe(true);
    expect(straddling.endsWith('…(1237 characters)')).toBe(true);
  });

  it('reads bearer tokens one way', () => {
    const cases: [string | undefined, string | undefined][] = [
      ['Bearer abc', 'abc'],
      ['bearer abc', 'abc'],
      ['BEARER \tabc  ', 'abc'],
      ['Bearer llmgw_key_x.y-z~+/=', 'llmgw_key_x.y-z~+/='],
      [undefined, undefined],
      ['', undefined],
      ['Bearer', undefined],
      ['Bearer ', undefined],
      ['Bearer a b', undefined],
      ['Basic dXNlcjpwYXNz', undefined],
      ['Bearerabc', undefined],
      ['abc', undefined],
    ];
    for (const [header, token] of cases)
      expect({ header, token: bearerToken(header) }).toEqual({ header, token });
  });

  it('passes a plain request id on, and makes one up for anything else', () => {
    const cases: [unknown, string | undefined][] = [
      ['trace-abc-123', 'trace-abc-123'],
      ['a.b_c:d-1', 'a.b_c:d-1'],
      ['x'.repeat(128), 'x'.repeat(128)],
      ['x'.repeat(129), undefined],
      ['', undefined],
      ['has space', undefined],
      ['line\r\nX-Injected: 1', undefined],
      ['ünïcode', undefined],
      [['a', 'b'], undefined],
      [undefined, undefined],
    ];
    for (const [id, valid] of cases) expect({ id, valid: validRequestId(id) }).toEqual({ id, valid });
    expect(requestIdFrom('trace-1')).toBe('trace-1');
    expect(requestIdFrom('bad id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('suggests close words only', () => {
    expect(didYouMean('gpu_clas', ['gpu_class', 'tp'])).toBe('gpu_class');
    expect(didYouMean('zzz', ['gpu_class', 'tp'])).toBeUndefined();
    expect(didYouMean('Qwen-7B', ['llama-8b', 'qwen-7b'])).toBe('qwen-7b');
    // The first of equally near candidates, as before candidates were skipped by length.
    expect(didYouMean('cat', ['bat', 'hat'])).toBe('bat');
  });

  it('looks for no suggestion for a word longer than any name, and skips candidates by length', () => {
    const names = Array.from({ length: 2000 }, (_, i) => `model-${i}`);
    expect(didYouMean('m'.repeat(1024 * 1024), names)).toBeUndefined();
    expect(
      didYouMean('x'.repeat(didYouMeanMaxLength + 1), ['x'.repeat(didYouMeanMaxLength + 1)]),
    ).toBeUndefined();
    expect(didYouMean('model-1999x', names)).toBe('model-1999');
    expect(didYouMean('a-much-longer-name-than-any-model', names)).toBeUndefined();
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
