import { describe, expect, it } from 'vitest';

import { AffinityMap } from './affinity-map.js';

describe('AffinityMap', () => {
  it('drops the least recently used binding past its bound', () => {
    const m = new AffinityMap({ ttlMs: 60_000, maxEntries: 2 });
    m.set('a', 'r1', 0);
    m.set('b', 'r2', 1);
    m.set('a', 'r3', 2);
    m.set('c', 'r4', 3);
    expect(m.size).toBe(2);
    expect(m.get('b', 4)).toBeUndefined();
    expect(m.get('a', 4)).toBe('r3');
    expect(m.get('c', 4)).toBe('r4');
  });

  it('forgets a binding past its TTL, and evicts expired ones as new ones come', () => {
    const m = new AffinityMap({ ttlMs: 100, maxEntries: 10 });
    m.set('a', 'r1', 0);
    m.set('b', 'r1', 50);
    expect(m.get('a', 100)).toBe('r1');
    expect(m.get('a', 101)).toBeUndefined();
    m.set('c', 'r2', 200);
    expect(m.size).toBe(1);
  });
});
