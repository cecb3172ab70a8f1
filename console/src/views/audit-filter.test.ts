import { describe, expect, it } from 'vitest';

import type { AuditView } from '../api.js';
import { auditQuery, auditSummary, nextBefore, resolveSince } from './audit-filter.js';

const now = Date.parse('2026-12-03T12:00:00Z');

describe('resolveSince', () => {
  it.each([
    ['', { iso: undefined }],
    ['  ', { iso: undefined }],
    ['90s', { iso: '2026-12-03T11:58:30.000Z' }],
    ['30m', { iso: '2026-12-03T11:30:00.000Z' }],
    ['2h', { iso: '2026-12-03T10:00:00.000Z' }],
    ['7d', { iso: '2026-11-26T12:00:00.000Z' }],
    ['2026-12-01T09:00:00Z', { iso: '2026-12-01T09:00:00.000Z' }],
    ['2026-12-01T09:00:00+02:00', { iso: '2026-12-01T07:00:00.000Z' }],
    [
      'yesterday',
      { error: '"yesterday" is neither a time (2026-12-01T09:00:00Z) nor a duration back (30m, 2h, 7d)' },
    ],
    ['2w', { error: '"2w" is neither a time (2026-12-01T09:00:00Z) nor a duration back (30m, 2h, 7d)' }],
  ])('%j', (text, want) => {
    expect(resolveSince(text, now)).toEqual(want);
  });
});

describe('auditQuery', () => {
  it.each([
    [{}, { limit: 50 }, '?limit=50'],
    [{ actor: ' ops ', action: '', target: undefined }, { limit: 50 }, '?limit=50&actor=ops'],
    [
      { target: 'model/qwen2.5', action: 'model.update', actor: 'ci bot', since: '2026-12-01T09:00:00.000Z' },
      { limit: 50, before: 120 },
      '?limit=50&before=120&actor=ci+bot&action=model.update&target=model%2Fqwen2.5&since=2026-12-01T09%3A00%3A00.000Z',
    ],
  ])('%j %j', (filter, page, want) => {
    expect(auditQuery(filter, page)).toBe(want);
  });
});

const entry = (id: number): AuditView => ({
  id,
  at: '2026-12-01T09:00:00Z',
  actor: 'a',
  action: 'x',
  target: 't',
  detail: {},
});

describe('nextBefore', () => {
  it('pages back from the oldest id while pages come back full', () => {
    expect(nextBefore([entry(9), entry(8), entry(7)], 3)).toBe(7);
    expect(nextBefore([entry(9), entry(8)], 3)).toBeUndefined();
    expect(nextBefore([], 3)).toBeUndefined();
  });
});

describe('auditSummary', () => {
  it.each([
    [
      {
        changes: [
          { path: 'replicas', before: 1, after: 2 },
          { path: 'context', after: 8192 },
        ],
      },
      'replicas: 1 -> 2; context: (none) -> 8192',
    ],
    [{ role: 'user', spec: { big: true } }, 'role="user"'],
    [{ note: 'x'.repeat(60) }, `note="${'x'.repeat(36)}...`],
    [{}, ''],
  ])('%j', (detail, want) => {
    expect(auditSummary(detail)).toBe(want);
  });
});
