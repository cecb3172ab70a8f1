import { describe, expect, it } from 'vitest';

import type { KeyView } from '../api.js';
import { keyRows, limitsForm, parseLimits } from './keys-rows.js';

const key = (o: Partial<KeyView> & Pick<KeyView, 'name'>): KeyView => ({
  role: 'user',
  prefix: 'llmgw_key_ab12...',
  created_at: '2026-12-01T09:00:00.000Z',
  created_by: 'admin',
  revoked_at: null,
  revoked_by: null,
  last_used_at: null,
  allowed_models: null,
  rpm: null,
  tpm: null,
  ...o,
});

describe('keyRows', () => {
  it('lists working keys by name, then revoked ones newest first, with limits in words', () => {
    const rows = keyRows([
      key({ name: 'old', revoked_at: '2026-12-01T10:00:00Z', revoked_by: 'admin' }),
      key({ name: 'zeta', allowed_models: ['qwen', 'llama:sql'], rpm: 60, tpm: 10_000 }),
      key({ name: 'newer', revoked_at: '2026-12-02T10:00:00Z', revoked_by: 'ops' }),
      key({ name: 'alpha', role: 'admin', last_used_at: '2026-12-03T08:00:00Z' }),
    ]);
    expect(rows.map((r) => r.name)).toEqual(['alpha', 'zeta', 'newer', 'old']);
    expect(rows[0]).toMatchObject({ role: 'admin', models: 'all', rpm: 'no limit', tpm: 'no limit' });
    expect(rows[0]?.lastUsed).toBe('2026-12-03T08:00:00Z');
    expect(rows[1]).toMatchObject({ models: 'qwen, llama:sql', rpm: '60', tpm: '10000', lastUsed: null });
    expect(rows[2]).toMatchObject({ revoked: '2026-12-02T10:00:00Z', revokedBy: 'ops' });
  });
});

describe('parseLimits', () => {
  const cases: { name: string; form: { models: string; rpm: string; tpm: string }; want: unknown }[] = [
    {
      name: 'empty fields: every model, no limits (null, so an edit clears them)',
      form: { models: '', rpm: '', tpm: '' },
      want: { ok: true, body: { models: null, rpm: null, tpm: null } },
    },
    {
      name: 'models split on commas and spaces, once each; numbers trimmed',
      form: { models: ' qwen, llama:sql  qwen,,', rpm: ' 60 ', tpm: '5000' },
      want: { ok: true, body: { models: ['qwen', 'llama:sql'], rpm: 60, tpm: 5000 } },
    },
    {
      name: 'zero, fractions and words refused, each at its field',
      form: { models: 'qwen', rpm: '0', tpm: '1.5' },
      want: {
        ok: false,
        errors: {
          rpm: 'Requests a minute is a whole number, 1 or more (got "0"); leave it empty for no limit',
          tpm: 'Tokens a minute is a whole number, 1 or more (got "1.5"); leave it empty for no limit',
        },
      },
    },
    {
      name: 'a word in one field refuses that field only',
      form: { models: '', rpm: 'ten', tpm: '' },
      want: {
        ok: false,
        errors: {
          rpm: 'Requests a minute is a whole number, 1 or more (got "ten"); leave it empty for no limit',
        },
      },
    },
  ];
  it.each(cases)('$name', ({ form, want }) => {
    expect(parseLimits(form)).toEqual(want);
  });

  it('round-trips a key through the edit form', () => {
    const k = key({ name: 'a', allowed_models: ['qwen', 'llama'], rpm: 10, tpm: null });
    expect(limitsForm(k)).toEqual({ models: 'qwen, llama', rpm: '10', tpm: '' });
    expect(parseLimits(limitsForm(k))).toEqual({
      ok: true,
      body: { models: ['qwen', 'llama'], rpm: 10, tpm: null },
    });
  });
});
