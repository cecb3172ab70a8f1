import { LlmgwError } from '../../core/errors.js';
import type { NodeInventory } from '../../gpu/types.js';
import type { NodeJoin } from '../../store/kysely-nodes.js';
import type { NodeRecord, Store } from '../../store/store.js';

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

type Reconnect = { id: string; inventory: NodeInventory; address: string };

/**
 * The store writes of agents starting their sessions, gathered over one turn of the event
 * loop and written in one transaction: after a control plane restarts, a thousand agents
 * dial within a second, and a transaction (a sync to disk) each held the event loop for
 * seconds while connections queued unaccepted.
 */
export class SessionWrites {
  readonly #store: Store;
  readonly #now: () => number;
  #joins: Pending<NodeJoin, NodeRecord>[] = [];
  #reconnects: Pending<Reconnect, void>[] = [];
  #scheduled = false;

  constructor(store: Store, now: () => number) {
    this.#store = store;
    this.#now = now;
  }

  /** A join with a token; rejects with the node's refusal (a revoked token, a name taken). */
  join(node: NodeJoin): Promise<NodeRecord> {
    return new Promise((resolve, reject) => {
      this.#joins.push({ item: node, resolve, reject });
      this.#schedule();
    });
  }

  /** A node back with its credential: its inventory, address and when it was seen. */
  reconnect(node: Reconnect): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#reconnects.push({ item: node, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // After the I/O callbacks at hand: every agent whose first frame came in this turn is in.
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    const joins = this.#joins.splice(0);
    const back = this.#reconnects.splice(0);
    const at = new Date(this.#now()).toISOString();
    if (joins.length > 0) {
      let outcomes: (NodeRecord | LlmgwError)[] | undefined;
      try {
        outcomes = await this.#store.nodes.joinMany(
          joins.map((j) => j.item),
          at,
        );
      } catch {
        // One write failed them all (a name taken at the same moment on another control
        // plane): each is written alone, so only that one is refused.
        for (const j of joins) this.#store.nodes.join(j.item, at).then(j.resolve, j.reject);
      }
      outcomes?.forEach((o, i) => {
        const j = joins[i];
        if (o instanceof LlmgwError) j?.reject(o);
        else j?.resolve(o);
      });
    }
    if (back.length > 0) {
      try {
        await this.#store.nodes.reconnected(back.map((b) => ({ ...b.item, at })));
        for (const b of back) b.resolve();
      } catch (e) {
        for (const b of back) b.reject(e);
      }
    }
  }
}
