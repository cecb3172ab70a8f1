import { describe, expect, it } from 'vitest';

import { ClientConnections } from './client-connections.js';

describe('ClientConnections', () => {
  it('admits up to max per address, counting peers’ connections, and again once one closes', () => {
    const c = new ClientConnections(3);
    expect([c.admit('a'), c.admit('a'), c.admit('b')]).toEqual([true, true, true]);
    c.setPeers(new Map([['a', 1]]));
    expect(c.admit('a')).toBe(false);
    expect(c.admit('b')).toBe(true);
    c.release('a');
    expect(c.admit('a')).toBe(true);
    expect(c.admit('a')).toBe(false);
    // Peers' connections closed: room again.
    c.setPeers(new Map([['a', 0]]));
    expect(c.admit('a')).toBe(true);
    expect(c.admit('a')).toBe(false);
  });

  it('keeps its own changes for a listener, latest count per address, and none without one', () => {
    const alone = new ClientConnections(2);
    alone.admit('a');
    expect(alone.takeChanges()).toEqual(new Map());
    const c = new ClientConnections(2);
    let calls = 0;
    c.onChange(() => calls++);
    c.admit('a');
    c.admit('a');
    c.admit('b');
    c.release('b');
    // Refused: nothing changed.
    expect(c.admit('a')).toBe(false);
    expect(calls).toBe(4);
    expect(c.takeChanges()).toEqual(
      new Map([
        ['a', 2],
        ['b', 0],
      ]),
    );
    expect(c.takeChanges()).toEqual(new Map());
  });
});
