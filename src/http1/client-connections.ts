/**
 * Connections open per client address, held to `max` (gateway.max_connections_per_client).
 * A process alone counts its own. A gateway worker also counts its peers' (each worker posts
 * the changes of its own counts; the primary tells each the others' sums, changes only), so
 * the bound holds for the gateway process as a whole: give or take the connections accepted
 * by another worker while its count was on its way (one message between processes).
 */
export class ClientConnections {
  readonly max: number;
  readonly #own = new Map<string, number>();
  readonly #peers = new Map<string, number>();
  /** Own counts changed since takeChanges, by address (0: none left); kept only while someone listens. */
  #changes = new Map<string, number>();
  #listener: (() => void) | undefined;

  constructor(max: number) {
    this.max = max;
  }

  /** Counts one more connection of `address`, unless it holds `max` already (here and at peers). */
  admit(address: string): boolean {
    const own = this.#own.get(address) ?? 0;
    if (own + (this.#peers.get(address) ?? 0) >= this.max) return false;
    this.#set(address, own + 1);
    return true;
  }

  /** A connection admitted before closed. */
  release(address: string): void {
    this.#set(address, (this.#own.get(address) ?? 1) - 1);
  }

  /** Called when this process's counts change (a worker posts them to its primary then). */
  onChange(listener: () => void): void {
    this.#listener = listener;
  }

  /** This process's counts that changed since the last call, by address (0: none left). */
  takeChanges(): Map<string, number> {
    const changes = this.#changes;
    this.#changes = new Map();
    return changes;
  }

  /** Other processes' connections, as their sums changed by address (0: none left). */
  setPeers(sums: ReadonlyMap<string, number>): void {
    for (const [address, n] of sums) {
      if (n > 0) this.#peers.set(address, n);
      else this.#peers.delete(address);
    }
  }

  #set(address: string, n: number): void {
    if (n > 0) this.#own.set(address, n);
    else this.#own.delete(address);
    if (this.#listener === undefined) return;
    this.#changes.set(address, Math.max(n, 0));
    this.#listener();
  }
}
