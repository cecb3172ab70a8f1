/** Something a RankHeap holds: ordered by rank, and told where it sits so removal is O(log n). */
export interface HeapItem {
  readonly rank: number;
  /** The heap it is in (identity only), or undefined. */
  heap: object | undefined;
  /** Its position in that heap's array; -1 when in none. */
  index: number;
}

/**
 * A binary min-heap of items ordered by rank, with removal of any item. Placement keeps one
 * per bucket of candidate nodes; nodes move between buckets as their free devices fall, so
 * removal has to be exact (a lazy heap would keep stale nodes at the front).
 */
export class RankHeap<T extends HeapItem> {
  readonly #items: T[] = [];

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    item.heap = this;
    item.index = this.#items.length;
    this.#items.push(item);
    this.#up(item.index);
  }

  pop(): T | undefined {
    const top = this.#items[0];
    if (top !== undefined) this.remove(top);
    return top;
  }

  remove(item: T): void {
    if (item.heap !== this) return;
    const items = this.#items;
    const at = item.index;
    const last = items.pop();
    if (last !== undefined && last !== item) {
      items[at] = last;
      last.index = at;
      this.#down(at);
      this.#up(last.index);
    }
    item.heap = undefined;
    item.index = -1;
  }

  #up(start: number): void {
    const items = this.#items;
    let i = start;
    const item = items[i];
    if (item === undefined) return;
    while (i > 0) {
      const parentAt = (i - 1) >> 1;
      const parent = items[parentAt];
      if (parent === undefined || parent.rank <= item.rank) break;
      items[i] = parent;
      parent.index = i;
      i = parentAt;
    }
    items[i] = item;
    item.index = i;
  }

  #down(start: number): void {
    const items = this.#items;
    const n = items.length;
    let i = start;
    const item = items[i];
    if (item === undefined) return;
    for (;;) {
      let childAt = 2 * i + 1;
      if (childAt >= n) break;
      let child = items[childAt];
      const right = items[childAt + 1];
      if (child === undefined) break;
      if (right !== undefined && right.rank < child.rank) {
        child = right;
        childAt += 1;
      }
      if (child.rank >= item.rank) break;
      items[i] = child;
      child.index = i;
      i = childAt;
    }
    items[i] = item;
    item.index = i;
  }
}
