/** What the router knows of one ready replica: the wire type the route table carries. */
export type { RouteReplica } from '../../protocol/routes.js';
import type { RouteReplica } from '../../protocol/routes.js';

/** The last reading of a replica's own metrics. */
export interface LoadReading {
  running: number;
  waiting: number;
  /** 0..1, where the engine reports one. */
  kvUsage?: number;
  /** When it was read (ms, the router's clock). */
  at: number;
}

/** How a request to a replica ended, for the circuit breaker and the load count. */
export type Outcome =
  /** Answered (any status below 500 but 401, or a 5xx after bytes reached the client). */
  | 'ok'
  /** Refused the connection, answered 401, or 5xx while its health check failed: try another. */
  | 'failed'
  /** The client went away; says nothing about the replica. */
  | 'cancelled'
  /**
   * Answered 5xx while its health check answered: the request was what it could not take.
   * Counts against it only when keys enough got the same since its last success.
   */
  | 'refused'
  /**
   * The engine went silent on the request (gateway.upstream_idle_timeout_s): failed, and only
   * a request it answers brings it back (its metrics may well answer while requests hang).
   */
  | 'stalled';

/** A replica chosen for one request; release it exactly once. */
export interface Lease {
  replica: RouteReplica;
  /** How long the request waited in the queue, ms. */
  queuedMs: number;
  /** `key`: the key whose request it was (the breaker counts keys a replica refused). */
  release(outcome: Outcome, key?: string): void;
}

export interface AcquireOptions {
  /** Requests of one conversation prefer the replica that served it before. */
  affinityKey?: string | undefined;
  /** Replicas already tried for this request (a retry goes elsewhere). */
  exclude?: ReadonlySet<string> | undefined;
  /** The client gave up: leave the queue. */
  signal?: AbortSignal | undefined;
  /** The prompt's leading blocks (promptBlocks): requests go where their prefix is cached. */
  prefix?: readonly number[] | undefined;
  /** The request's id, for a `pick` hook. */
  requestId?: string | undefined;
}

/**
 * How the router picks among the replicas that can take a request: `ours` (the default)
 * is the least loaded, kept on the replica holding the request's prefix or conversation
 * while that one is not overloaded; the others are there to be measured against it.
 */
export type RoutingPolicy = 'ours' | 'least-loaded' | 'round-robin' | 'random';

/** What a `pick` hook is told of the request it picks a replica for. */
export interface PickRequest {
  model: string;
  requestId: string | undefined;
  affinityKey: string | undefined;
}

/**
 * Picks one of `candidates` (the replicas not full, not excluded and not cooling down;
 * never empty), or returns undefined to leave it to the policy. For measuring routing
 * against an oracle that knows the engines' true state.
 */
export type PickHook = (candidates: readonly RouteReplica[], request: PickRequest) => string | undefined;

/**
 * A model with no replica in the route table that comes back by itself: its launcher starts
 * a failed engine again (the route table's `restarting`). Its requests wait in its queue.
 */
export interface Restarting {
  /** ms from now until the restart is due; unset when it is loading again already. */
  dueInMs?: number | undefined;
  /** Why it is down, for the answer when a request's wait runs out. */
  reason: string;
}

/** Why no replica was given; the gateway turns these into 503 (with Retry-After) or 404. */
export type RouterRefusal =
  | { kind: 'no-replica'; message: string }
  | { kind: 'queue-full'; message: string; retryAfterS: number }
  | { kind: 'queue-timeout'; message: string; retryAfterS: number }
  /** Its replica is restarting, and was not back within the request's wait (or will not be). */
  | { kind: 'restarting'; message: string; retryAfterS: number }
  | { kind: 'cancelled'; message: string };

export class RouterError extends Error {
  readonly refusal: RouterRefusal;
  constructor(refusal: RouterRefusal) {
    super(refusal.message);
    this.name = 'RouterError';
    this.refusal = refusal;
  }
}

/** One replica's state, for /metrics and views. */
export interface ReplicaLoad {
  id: string;
  model: string;
  inFlight: number;
  reading?: LoadReading;
  stale: boolean;
  breaker: 'closed' | 'open' | 'half-open';
  score: number;
  /** Requests it computes at once (the replica's capacity). */
  capacity?: number;
  /** Why the last scrape failed, until one succeeds. */
  scrapeError?: string | undefined;
}

/**
 * Why a scrape gave no reading. Only `unreachable` (the connection was refused, or the
 * host is gone) counts against the replica's breaker: a slow or malformed answer says the
 * metrics are missing, not that requests would fail, and the reading going stale already
 * makes the replica count as busy.
 */
export type ScrapeFailureKind = 'unreachable' | 'timeout' | 'status' | 'no-metrics';
