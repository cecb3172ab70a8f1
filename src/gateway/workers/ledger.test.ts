import { describe, expect, it } from 'vitest';

import { InFlightLedger, peerCounts, type Counts } from './ledger.js';

const m = (o: Record<string, number>): Map<string, number> => new Map(Object.entries(o));

describe('peerCounts', () => {
  it.each([
    { name: 'one member has no peers', members: { a: { r1: 2 } }, want: { a: {} } },
    {
      name: 'each is told the others’ sum',
      members: { a: { r1: 1 }, b: { r1: 2, r2: 1 }, c: {} },
      want: { a: { r1: 2, r2: 1 }, b: { r1: 1 }, c: { r1: 3, r2: 1 } },
    },
    {
      name: 'a replica only its own member uses is left out',
      members: { a: { r1: 1 }, b: { r2: 1 } },
      want: { a: { r2: 1 }, b: { r1: 1 } },
    },
  ])('$name', ({ members, want }) => {
    const got = peerCounts(new Map(Object.entries(members).map(([k, v]) => [k, m(v)])));
    expect(Object.fromEntries([...got].map(([k, v]) => [k, Object.fromEntries(v)]))).toEqual(want);
  });
});

describe('InFlightLedger', () => {
  it('answers once per turn, only members whose peers changed, and forgets a member removed', async () => {
    const told: [string, Record<string, number>][] = [];
    const ledger = new InFlightLedger((member, peers: Counts) =>
      told.push([member, Object.fromEntries(peers)]),
    );
    ledger.post('a', m({ r1: 1 }));
    ledger.post('b', m({}));
    ledger.post('a', m({ r1: 2 }));
    await new Promise((r) => setImmediate(r));
    expect(told).toEqual([
      ['a', {}],
      ['b', { r1: 2 }],
    ]);
    told.length = 0;
    ledger.post('b', m({ r2: 1 }));
    await new Promise((r) => setImmediate(r));
    expect(told).toEqual([['a', { r2: 1 }]]);
    told.length = 0;
    ledger.remove('a');
    await new Promise((r) => setImmediate(r));
    expect(told).toEqual([['b', {}]]);
  });
});
