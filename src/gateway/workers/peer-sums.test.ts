import { describe, expect, it } from 'vitest';

import { PeerSums } from './peer-sums.js';

const m = (o: Record<string, number>): Map<string, number> => new Map(Object.entries(o));
const turn = () => new Promise((r) => setImmediate(r));

describe('PeerSums', () => {
  const start = () => {
    const told: [string, Record<string, number>][] = [];
    const sums = new PeerSums((member, s) => told.push([member, Object.fromEntries(s)]));
    return { sums, told, take: () => told.splice(0) };
  };

  it("tells each member the others' sums of the keys that changed, once per turn", async () => {
    const { sums, take } = start();
    sums.join('a');
    sums.join('b');
    sums.join('c');
    await turn();
    expect(take()).toEqual([]);
    sums.post('a', m({ '10.0.0.1': 1 }));
    sums.post('a', m({ '10.0.0.1': 3 }));
    sums.post('b', m({ '10.0.0.1': 2, '10.0.0.2': 1 }));
    await turn();
    expect(take()).toEqual([
      ['a', { '10.0.0.1': 2, '10.0.0.2': 1 }],
      ['b', { '10.0.0.1': 3 }],
      ['c', { '10.0.0.1': 5, '10.0.0.2': 1 }],
    ]);
    // A member's own change leaves its sum as it was: it is not told.
    sums.post('c', m({ '10.0.0.2': 1 }));
    await turn();
    expect(take()).toEqual([
      ['a', { '10.0.0.2': 2 }],
      ['b', { '10.0.0.2': 1 }],
    ]);
    // None left (0): the others are told the key's sum went down, to 0 where it is gone.
    sums.post('b', m({ '10.0.0.2': 0 }));
    sums.post('c', m({ '10.0.0.2': 0 }));
    await turn();
    expect(take()).toEqual([
      ['a', { '10.0.0.2': 0 }],
      ['b', { '10.0.0.2': 0 }],
      ['c', { '10.0.0.2': 0 }],
    ]);
  });

  it('tells a member that joins every sum, and takes a removed member’s counts away', async () => {
    const { sums, take } = start();
    sums.post('a', m({ x: 2, y: 1 }));
    sums.post('b', m({ x: 1 }));
    await turn();
    take();
    sums.join('c');
    await turn();
    expect(take()).toEqual([['c', { x: 3, y: 1 }]]);
    sums.remove('a');
    await turn();
    expect(take()).toEqual([
      ['b', { x: 0, y: 0 }],
      ['c', { x: 1, y: 0 }],
    ]);
    // Posting the same count again changes nothing, and tells nobody.
    sums.post('b', m({ x: 1 }));
    await turn();
    expect(take()).toEqual([]);
  });
});
