/**
 * Requests in flight per replica, as each gateway worker (and the primary's own gateway)
 * posts them: each member is told the sum of the others' counts, which its router counts in
 * load and against capacity (Router.setPeerInFlight). Posts are coalesced: members post at
 * most once per event-loop turn, and the ledger answers at most once per turn.
 */
export type Counts = ReadonlyMap<string, number>;

/** For each member, the sum of every other member's counts (replicas at 0 left out). */
export function peerCounts(members: ReadonlyMap<string, Counts>): Map<string, Map<string, number>> {
  const total = new Map<string, number>();
  for (const counts of members.values())
    for (const [replica, n] of counts) total.set(replica, (total.get(replica) ?? 0) + n);
  const out = new Map<string, Map<string, number>>();
  for (const [member, own] of members) {
    const peers = new Map<string, number>();
    for (const [replica, n] of total) {
      const rest = n - (own.get(replica) ?? 0);
      if (rest > 0) peers.set(replica, rest);
    }
    out.set(member, peers);
  }
  return out;
}

function same(a: Counts | undefined, b: Counts): boolean {
  if (a === undefined || a.size !== b.size) return false;
  for (const [k, v] of b) if (a.get(k) !== v) return false;
  return true;
}

export class InFlightLedger {
  readonly #members = new Map<string, Counts>();
  /** What each member was last told. */
  readonly #told = new Map<string, Counts>();
  readonly #tell: (member: string, peers: Counts) => void;
  #scheduled = false;

  constructor(tell: (member: string, peers: Counts) => void) {
    this.#tell = tell;
  }

  post(member: string, counts: Counts): void {
    this.#members.set(member, counts);
    this.#schedule();
  }

  /** A member gone (a worker that exited): its requests are no longer anyone's. */
  remove(member: string): void {
    this.#members.delete(member);
    this.#told.delete(member);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      for (const [member, peers] of peerCounts(this.#members)) {
        if (same(this.#told.get(member), peers)) continue;
        this.#told.set(member, peers);
        this.#tell(member, peers);
      }
    });
  }
}
