import type { UpstreamPool } from '../http1/upstream-pool.js';
import type { RouteReplica } from '../protocol/routes.js';

/** Asks a replica's health path; resolves with the status (0 when it could not be asked), never rejects. */
export type HealthGet = (replica: RouteReplica, o: { timeoutMs: number }) => Promise<number>;

export interface ReplicaHealthOptions {
  get: HealthGet;
  /** How long an answer stands for later failures of the same replica (default 1 s). */
  keepMs?: number;
  /** An answer slower than this counts as unhealthy (default 2 s). */
  timeoutMs?: number;
  now?: () => number;
}

interface Known {
  /** When it answered; undefined while it is asked. */
  at: number | undefined;
  healthy: Promise<boolean>;
}

/**
 * Whether a replica that just answered a request with a 5xx is itself well: its engine's own
 * health path (llama.cpp, vLLM, SGLang and TensorRT-LLM answer 200 on /health when they
 * serve). One question per replica at a time, shared by every failure that comes while it
 * is asked, and its answer kept `keepMs`: a client sending a thousand refused requests costs
 * the engine one health check a second, not a thousand.
 */
export class ReplicaHealth {
  readonly #get: HealthGet;
  readonly #keepMs: number;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #known = new Map<string, Known>();

  constructor(o: ReplicaHealthOptions) {
    this.#get = o.get;
    this.#keepMs = o.keepMs ?? 1000;
    this.#timeoutMs = o.timeoutMs ?? 2000;
    this.#now = o.now ?? (() => performance.now());
  }

  /** True when its health path answers 200 (asked now, or in the last `keepMs`). */
  healthy(replica: RouteReplica): Promise<boolean> {
    const now = this.#now();
    const known = this.#known.get(replica.id);
    // Being asked, or answered within keepMs: shared.
    if (known !== undefined && (known.at === undefined || now - known.at < this.#keepMs))
      return known.healthy;
    const entry: Known = { at: undefined, healthy: Promise.resolve(false) };
    entry.healthy = this.#get(replica, { timeoutMs: this.#timeoutMs }).then((status) => {
      entry.at = this.#now();
      return status === 200;
    });
    this.#known.set(replica.id, entry);
    if (this.#known.size > 4096) this.#forgetOld(now);
    return entry.healthy;
  }

  /** Replicas gone from the route table leave no answers behind. */
  #forgetOld(now: number): void {
    for (const [id, k] of this.#known)
      if (k.at !== undefined && now - k.at >= this.#keepMs) this.#known.delete(id);
  }
}

/** The health question over the gateway's own connections to the engine (its TLS and CA, its engine proxy path). */
export function poolHealth(poolOf: (endpoint: string) => UpstreamPool): HealthGet {
  return (replica, o) =>
    new Promise((resolve) => {
      let status = 0;
      let done = false;
      const finish = (answer: number) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(answer);
      };
      const call = poolOf(replica.endpoint).request(
        {
          method: 'GET',
          path: replica.healthPath,
          headers: { authorization: `Bearer ${replica.apiKey}`, accept: 'application/json' },
          body: '',
        },
        {
          onHead: (s) => (status = s),
          onData: () => undefined,
          onEnd: () => finish(status),
          onError: () => finish(0),
        },
      );
      const timer = setTimeout(() => {
        call.abort();
        finish(0);
      }, o.timeoutMs);
      timer.unref();
    });
}
