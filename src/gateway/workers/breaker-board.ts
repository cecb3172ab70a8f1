import { Breaker, type BreakerEvidence, type BreakerSnapshot, type BreakerState } from '../router/breaker.js';

/** One replica's breaker state, for /metrics. */
export interface ReplicaBreaker {
  replica: string;
  model: string;
  state: BreakerState;
}

/**
 * The breaker of each replica for every process of a gateway (its workers and the primary's
 * own gateway), held by the primary: each process sends the evidence that changed its own
 * copy (it acts on it at once: a refused connection is not retried there while the news
 * travels), the board applies it to the one breaker of the replica, and when that changed
 * tells every process its state, which each adopts. So a replica is out of rotation in all
 * processes or in none, and the keys a backstop counts are counted across processes.
 * Changes are told at most once per event-loop turn, as the in-flight ledger does.
 */
export class BreakerBoard {
  readonly #breakers = new Map<string, { model: string; breaker: Breaker }>();
  readonly #tell: (states: Map<string, BreakerSnapshot>) => void;
  readonly #now: () => number;
  readonly #changed = new Set<string>();
  #scheduled = false;

  constructor(
    tell: (states: Map<string, BreakerSnapshot>) => void,
    now: () => number = () => performance.now(),
  ) {
    this.#tell = tell;
    this.#now = now;
  }

  /** The route table's replicas: new ones start closed, those gone are forgotten. */
  setReplicas(replicas: readonly { id: string; model: string }[]): void {
    const seen = new Set<string>();
    for (const r of replicas) {
      seen.add(r.id);
      const known = this.#breakers.get(r.id);
      if (known === undefined) this.#breakers.set(r.id, { model: r.model, breaker: new Breaker() });
      else known.model = r.model;
    }
    for (const id of this.#breakers.keys()) if (!seen.has(id)) this.#breakers.delete(id);
  }

  /** What one process saw of a replica: applied to its breaker, told to all when it changed it. */
  evidence(replica: string, e: BreakerEvidence): void {
    let known = this.#breakers.get(replica);
    if (known === undefined) {
      // A replica one process knows before the board's next read of the routes.
      known = { model: '', breaker: new Breaker() };
      this.#breakers.set(replica, known);
    }
    const version = known.breaker.version;
    known.breaker.apply(e, this.#now());
    if (known.breaker.version === version) return;
    this.#changed.add(replica);
    this.#schedule();
  }

  /** Every breaker's state now: what a process started later adopts. */
  snapshots(): Map<string, BreakerSnapshot> {
    const now = this.#now();
    const out = new Map<string, BreakerSnapshot>();
    for (const [id, { breaker }] of this.#breakers) out.set(id, breaker.snapshot(now));
    return out;
  }

  /** One state per replica of the route table: what /metrics says of every process. */
  states(): ReplicaBreaker[] {
    const now = this.#now();
    const out: ReplicaBreaker[] = [];
    for (const [replica, { model, breaker }] of this.#breakers)
      if (model !== '') out.push({ replica, model, state: breaker.state(now) });
    return out;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      const now = this.#now();
      const states = new Map<string, BreakerSnapshot>();
      for (const id of this.#changed) {
        const known = this.#breakers.get(id);
        if (known !== undefined) states.set(id, known.breaker.snapshot(now));
      }
      this.#changed.clear();
      if (states.size > 0) this.#tell(states);
    });
  }
}
