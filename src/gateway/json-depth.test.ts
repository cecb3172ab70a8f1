import { describe, expect, it } from 'vitest';

import { nestsDeeperThan } from './json-depth.js';

describe('nestsDeeperThan', () => {
  const b = (s: string) => Buffer.from(s);

  it('counts arrays and objects, and stops at the first level past the limit', () => {
    expect(nestsDeeperThan(b('{"a":[1,{"b":[]}]}'), 4)).toBe(false);
    expect(nestsDeeperThan(b('{"a":[1,{"b":[]}]}'), 3)).toBe(true);
    expect(nestsDeeperThan(b('['.repeat(100_000)), 100)).toBe(true);
  });

  it('does not count brackets inside strings, escaped quotes included', () => {
    expect(nestsDeeperThan(b(`{"a":"${'['.repeat(500)}"}`), 2)).toBe(false);
    expect(nestsDeeperThan(b(`{"a":"x\\"${'{'.repeat(50)}\\\\"}`), 2)).toBe(false);
    expect(nestsDeeperThan(b(`{"a":"x\\\\",${'['.repeat(5)}}`), 3)).toBe(true);
  });

  it('leaves an unterminated string to the JSON parser', () => {
    expect(nestsDeeperThan(b('{"a":"[[[[['), 2)).toBe(false);
  });
});
