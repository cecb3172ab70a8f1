import { describe, expect, it } from 'vitest';

import { mergePatch } from './catalog.js';

describe('JSON merge patch (RFC 7386)', () => {
  it.each([
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: ['b'] }, { a: ['c'] }, { a: ['c'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
  ])('merges %j with %j', (target, patch, expected) => {
    expect(mergePatch(target, patch)).toEqual(expected);
  });
});
