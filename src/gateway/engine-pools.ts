import { UpstreamPool } from '../http1/upstream-pool.js';
import type { RouteTable } from '../protocol/routes.js';

/** The gateway's connections to each engine, made once and kept while the engine is in the route table. */
export class EnginePools {
  readonly #pools = new Map<string, UpstreamPool>();
  /** The CA that https:// endpoints chain to (the route table's). */
  #ca: string | undefined;

  get(endpoint: string): UpstreamPool {
    let pool = this.#pools.get(endpoint);
    if (pool === undefined) {
      // No answer timeout: a long answer is not streamed, and a stream may pause.
      pool = new UpstreamPool(endpoint, { ca: this.#ca });
      this.#pools.set(endpoint, pool);
    }
    return pool;
  }

  /**
   * Connections to engines that are gone are closed (requests on them finish first), and
   * every TLS one when the cluster CA changed.
   */
  follow(table: RouteTable): void {
    const live = new Set(table.replicas.map((r) => r.endpoint));
    const caChanged = table.ca !== this.#ca;
    this.#ca = table.ca;
    for (const [endpoint, pool] of this.#pools) {
      if (live.has(endpoint) && !(caChanged && endpoint.startsWith('https:'))) continue;
      this.#pools.delete(endpoint);
      void pool.close();
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
  }
}
