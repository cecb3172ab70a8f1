/**
 * Counts by key (a worker's connections open per client address) that members post as
 * changes; each member is told, for the keys that changed, the sum of the other members'
 * counts (ClientConnections.setPeers). Changes only, both ways: the keys are every client
 * address, and few change at once. Told at most once per event-loop turn, as the in-flight
 * ledger tells.
 */
export class PeerSums {
  readonly #members = new Map<string, Map<string, number>>();
  readonly #totals = new Map<string, number>();
  /** Keys changed since the last telling, with who changed them (a member's own change leaves its sum as it was). */
  readonly #changed = new Map<string, Set<string>>();
  /** Members new since the last telling (a worker started again): told every sum, not the changes. */
  readonly #fresh = new Set<string>();
  readonly #tell: (member: string, sums: Map<string, number>) => void;
  #scheduled = false;

  constructor(tell: (member: string, sums: Map<string, number>) => void) {
    this.#tell = tell;
  }

  /** A member that started: told the others' sums as they are. */
  join(member: string): void {
    if (!this.#members.has(member)) this.#members.set(member, new Map());
    this.#fresh.add(member);
    this.#schedule();
  }

  /** A member's counts that changed, by key (0: none left). */
  post(member: string, changes: ReadonlyMap<string, number>): void {
    let own = this.#members.get(member);
    if (own === undefined) {
      own = new Map();
      this.#members.set(member, own);
      this.#fresh.add(member);
    }
    for (const [key, n] of changes) {
      const was = own.get(key) ?? 0;
      if (n === was) continue;
      if (n > 0) own.set(key, n);
      else own.delete(key);
      this.#add(key, n - was, member);
    }
    this.#schedule();
  }

  /** A member gone (a worker that exited): its connections are closed with it. */
  remove(member: string): void {
    const own = this.#members.get(member);
    if (own === undefined) return;
    this.#members.delete(member);
    this.#fresh.delete(member);
    for (const [key, n] of own) this.#add(key, -n, member);
    this.#schedule();
  }

  #add(key: string, delta: number, by: string): void {
    const total = (this.#totals.get(key) ?? 0) + delta;
    if (total > 0) this.#totals.set(key, total);
    else this.#totals.delete(key);
    const who = this.#changed.get(key);
    if (who === undefined) this.#changed.set(key, new Set([by]));
    else who.add(by);
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      for (const [member, own] of this.#members) {
        const sums = new Map<string, number>();
        if (this.#fresh.has(member)) {
          for (const [key, total] of this.#totals) {
            const others = total - (own.get(key) ?? 0);
            if (others > 0) sums.set(key, others);
          }
        } else
          for (const [key, who] of this.#changed) {
            if (who.size === 1 && who.has(member)) continue;
            sums.set(key, (this.#totals.get(key) ?? 0) - (own.get(key) ?? 0));
          }
        if (sums.size > 0) this.#tell(member, sums);
      }
      this.#changed.clear();
      this.#fresh.clear();
    });
  }
}
