import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

import type { Logger } from 'pino';

import type { Settings } from '../config/load.js';
import { Gateway } from '../gateway/gateway.js';
import { storeKeys } from '../gateway/keys.js';
import { mountGateway } from '../gateway/mount.js';
import type { GatewayKeys, KeyLimits, RouteSource, UsageSink } from '../gateway/services.js';
import { sharedRoutes } from '../gateway/shared-routes.js';
import { sumCounts } from '../gateway/workers/counts.js';
import { WorkerPool } from '../gateway/workers/pool.js';
import { primaryServices } from '../gateway/workers/primary-services.js';
import type { ScaleSignals } from '../protocol/load-report.js';
import type { ControlPlane } from '../server/control-plane.js';
import { StoreUsage } from '../server/services/store-usage.js';

/**
 * The gateway's composition: its settings as options, and what it is given (keys, routes,
 * usage, signals, limits) in the control plane's process or beside its workers. The request
 * path itself is src/gateway's, from the HTTP front (src/http1) to the engines.
 */

export function gatewayOptions(settings: Settings): {
  maxBodyBytes: number;
  retries: number;
  upstreamIdleMs: number;
  queue: { maxPerModel: number; timeoutMs: number };
  waitingRoom: { maxPerModel: number; timeoutMs: number };
} {
  const g = settings.gateway;
  return {
    maxBodyBytes: Math.round(g.max_body_mb * 1024 * 1024),
    retries: g.retries,
    upstreamIdleMs: Math.round(g.upstream_idle_timeout_s * 1000),
    queue: { maxPerModel: g.queue.max_per_model, timeoutMs: Math.round(g.queue.timeout_s * 1000) },
    waitingRoom: {
      maxPerModel: g.waiting_room.max_per_model,
      timeoutMs: Math.round(g.waiting_room.timeout_s * 1000),
    },
  };
}

export function newGateway(o: {
  keys: GatewayKeys;
  routes: RouteSource;
  usage: UsageSink;
  logger: Logger;
  settings: Settings;
  /** The autoscaler's (in process) or remoteSignals: load reports, and wake-ups of models at zero. */
  signals?: ScaleSignals | undefined;
  limits?: KeyLimits | undefined;
}): Gateway {
  return new Gateway({
    keys: o.keys,
    routes: o.routes,
    usage: o.usage,
    logger: o.logger,
    ...gatewayOptions(o.settings),
    ...(o.signals === undefined ? {} : { signals: o.signals }),
    ...(o.limits === undefined ? {} : { limits: o.limits }),
  });
}

/** gateway.workers as a number: "auto" is one per core. */
export function workerCount(setting: Settings['gateway']['workers']): number {
  return setting === 'auto' ? availableParallelism() : setting;
}

/** The gateway's worker processes the settings ask for; none for gateway.workers: 0. */
export function newWorkerPool(settings: Settings, logger: Logger): WorkerPool | undefined {
  const count = workerCount(settings.gateway.workers);
  if (count === 0) return undefined;
  return new WorkerPool({
    count,
    gateway: gatewayOptions(settings),
    maxConnectionsPerClient: settings.gateway.max_connections_per_client,
    logger,
    entry: fileURLToPath(new URL('./gateway-worker-main.js', import.meta.url)),
  });
}

/**
 * The gateway in the control plane's process (`llmgw server`, `llmgw up`): keys and routes
 * from it, usage written to its store (told to GET /events), its counters sampled for GET
 * /traffic. Stopped before the store closes.
 */
export async function startLocalGateway(
  cp: ControlPlane,
  o: {
    logger: Logger;
    settings: Settings;
    routes?: RouteSource;
    /** Where load reports and wake-ups go; the control plane's autoscaler unless told otherwise. */
    signals?: ScaleSignals | undefined;
    pool?: WorkerPool | undefined;
  },
): Promise<Gateway> {
  const keys = storeKeys(cp.authenticator);
  const routes = sharedRoutes(o.routes ?? cp.fleet);
  const usage = new StoreUsage(cp.store.usage, cp.events);
  const signals = o.signals ?? cp.autoscaler;
  const gateway = newGateway({
    keys,
    routes,
    usage,
    logger: o.logger,
    settings: o.settings,
    signals,
    limits: o.pool?.limits,
  });
  await gateway.start();
  mountGateway(cp, gateway);
  gateway.metrics.include(cp.autoscaler.metrics);
  // The workers (gateway.workers) serve /v1 on the listen address; this one serves it on connections they relay.
  o.pool?.attach(primaryServices(gateway, { keys, routes, usage, signals }));
  const pool = o.pool;
  cp.traffic.attach(() =>
    pool === undefined ? gateway.metrics.counts() : sumCounts([gateway.metrics.counts(), pool.counts()]),
  );
  cp.beforeStoreClose(() => gateway.stop());
  return gateway;
}
