import type { UsageRow } from '../core/api-types.js';
import type { RouteTable } from '../protocol/routes.js';

import type { LimitRefusal } from './rate-limits.js';

export type { GatewayKeys } from './keys.js';
export type { UsageRow };

/**
 * What a gateway is given by whoever composes it (src/cli): where its routes, usage and
 * key limits live. Each has an implementation where that state lives: the control plane in
 * its own process (its fleet, src/server/services/store-usage.ts, RateLimits), the control plane's
 * API for a gateway of its own (./control-plane-api.ts), a worker's primary over IPC
 * (./workers/worker.ts).
 */

/** The ready replicas and the catalog: the fleet's table, or the control plane's GET /gateway/routes. */
export interface RouteSource {
  routeTable(): Promise<RouteTable>;
}

/** Where counted usage is written, in batches off the request path (see UsageRecorder). */
export interface UsageSink {
  /** Resolves once written; a rejection keeps the rows for the next try. */
  write(rows: UsageRow[]): Promise<void>;
}

/** Requests and tokens per key, counted where every gateway worker's requests count. */
export interface KeyLimits {
  admit(
    key: string,
    limits: { rpm: number | null; tpm: number | null },
  ): LimitRefusal | undefined | Promise<LimitRefusal | undefined>;
  charge(key: string, tokens: number, limits: { tpm: number | null }): void;
}
