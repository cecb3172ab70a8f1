import { describe, expect, it } from 'vitest';

import { RankHeap, type HeapItem } from './rank-heap.js';

const item = (rank: number): HeapItem => ({ rank, heap: undefined, index: -1 });

describe('RankHeap', () => {
  it('pops in rank order whatever the order pushed, and removes any item', () => {
    const heap = new RankHeap<HeapItem>();
    const items = [5, 3, 9, 1, 7, 2, 8, 0, 6, 4].map(item);
    for (const i of items) heap.push(i);
    const four = items[9];
    const nine = items[2];
    if (four === undefined || nine === undefined) throw new Error('fixture');
    heap.remove(four);
    heap.remove(nine);
    expect(four.heap).toBeUndefined();
    expect(heap.size).toBe(8);
    const out: number[] = [];
    for (let i = heap.pop(); i !== undefined; i = heap.pop()) out.push(i.rank);
    expect(out).toEqual([0, 1, 2, 3, 5, 6, 7, 8]);
  });

  it('ignores removing an item it does not hold', () => {
    const a = new RankHeap<HeapItem>();
    const b = new RankHeap<HeapItem>();
    const x = item(1);
    a.push(x);
    b.remove(x);
    expect(a.size).toBe(1);
    expect(x.heap).toBe(a);
  });

  it('stays ordered through many random pushes and removals', () => {
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const heap = new RankHeap<HeapItem>();
    const inside = new Set<HeapItem>();
    for (let step = 0; step < 5000; step++) {
      if (inside.size > 0 && next() < 0.4) {
        const all = [...inside];
        const victim = all[Math.floor(next() * all.length)];
        if (victim === undefined) continue;
        heap.remove(victim);
        inside.delete(victim);
      } else {
        const i = item(Math.floor(next() * 1000));
        heap.push(i);
        inside.add(i);
      }
      expect(heap.peek()?.rank).toBe(
        inside.size === 0 ? undefined : Math.min(...[...inside].map((i) => i.rank)),
      );
    }
  });
});
