import type { Logger } from 'pino';
import { z } from 'zod';

import type { Requester } from '../client/failover-client.js';
import type { Settings } from '../config/load.js';
import { nodeRequest } from '../http1/client-io.js';
import { Gateway } from '../gateway/gateway.js';
import type { GatewayKeys } from '../gateway/keys.js';
import type { UsageSink } from '../gateway/usage-recorder.js';
import type { ScaleSignals } from '../protocol/load-report.js';
import type { RouteTable } from '../protocol/routes.js';
import type { HttpServer } from '../server/http-server.js';
import type { ControlPlane } from '../server/control-plane.js';
import { storeKeys } from '../gateway/keys.js';
import { availableParallelism } from 'node:os';
import type { KeyLimits } from '../gateway/gateway.js';
import { WorkerPool, type PrimaryServices } from './gateway-workers/pool.js';
import { sumCounts } from './gateway-workers/counts.js';

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

export function remoteRoutes(client: Requester): () => Promise<RouteTable> {
  return async () => (await client.request<RouteTable>('GET', '/gateway/routes')).body;
}

export function remoteUsage(client: Requester): UsageSink {
  return async (rows) => {
    await client.request('POST', '/gateway/usage', { json: { rows } });
  };
}

const wakeAnswer = z.union([
  z.object({ ok: z.literal(true) }),
  z.object({ ok: z.literal(false), reason: z.string() }),
]);

/** The load report and wake-ups of a gateway of its own, over the control plane's API. */
export function remoteSignals(client: Requester): ScaleSignals {
  return {
    report: async (report) => {
      await client.request('POST', '/gateway/load', { json: report });
    },
    wake: async (model) => {
      const body = (await client.request<unknown>('POST', '/gateway/wake', { json: { model } })).body;
      const answer = wakeAnswer.safeParse(body);
      if (!answer.success)
        throw new Error(
          `the control plane answered POST /gateway/wake with ${JSON.stringify(body).slice(0, 200)}, not {"ok": true} or {"ok": false, "reason": "..."}: is it an older llmgw?`,
        );
      return answer.data;
    },
  };
}

export function newGateway(o: {
  keys: GatewayKeys;
  routes: () => Promise<RouteTable>;
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
  });
}

/** The primary's gateway as the workers' pool sees it: a member of the in-flight ledger, its metrics summed in. */
export function poolServices(
  gateway: Gateway,
  parts: Pick<PrimaryServices, 'keys' | 'routes' | 'usage' | 'signals'>,
): PrimaryServices {
  return {
    ...parts,
    local: {
      ownInFlight: () => gateway.router.ownInFlight(),
      onInFlightChange: (listener) => gateway.router.onInFlightChange(listener),
      setPeerInFlight: (counts) => gateway.router.setPeerInFlight(counts),
      metricsJson: () => gateway.metrics.registry.getMetricsAsJSON(),
      onBreakerEvidence: (listener) => gateway.router.onBreakerEvidence(listener),
      adoptBreakers: (states) => gateway.router.adoptBreakers(states),
    },
  };
}

/** One read of the route table shared by the callers of `ms` (the primary's gateway and its workers' pool). */
export function sharedRoutes(read: () => Promise<RouteTable>, ms = 250): () => Promise<RouteTable> {
  let last: { at: number; table: Promise<RouteTable> } | undefined;
  return () => {
    const now = Date.now();
    if (last === undefined || now - last.at >= ms) {
      const table = read();
      last = { at: now, table };
      // A failure is not kept: the next caller reads again.
      table.catch(() => {
        if (last?.table === table) last = undefined;
      });
    }
    return last.table;
  };
}

/** Where the gateway is served: a control plane's address, or a gateway's own. */
export type GatewayHost = Pick<HttpServer, 'fastLane' | 'mount'>;

/** /v1 on the front door's fast path (node:http for what it leaves), and /metrics. */
export function mountGateway(host: GatewayHost, gateway: Gateway): void {
  host.fastLane('/v1/', {
    maxBodyBytes: gateway.maxBodyBytes,
    handler: (req, res) => gateway.handle(req, res),
    fallback: (req, res) => gateway.handle(nodeRequest(req), res),
  });
  host.mount('/metrics', (req, res) => void gateway.metricsHandler(nodeRequest(req), res));
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
    routes?: () => Promise<RouteTable>;
    /** Where load reports and wake-ups go; the control plane's autoscaler unless told otherwise. */
    signals?: ScaleSignals | undefined;
    pool?: WorkerPool | undefined;
  },
): Promise<Gateway> {
  const keys = storeKeys(cp.authenticator);
  const routes = sharedRoutes(o.routes ?? (() => cp.fleet.routeTable()));
  const usage: UsageSink = async (rows) => {
    await cp.store.usage.add(rows);
    if (rows.length > 0) cp.events.publish('usage');
  };
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
  o.pool?.attach(poolServices(gateway, { keys, routes, usage, signals }));
  const pool = o.pool;
  cp.traffic.attach(() =>
    pool === undefined ? gateway.metrics.counts() : sumCounts([gateway.metrics.counts(), pool.counts()]),
  );
  cp.beforeStoreClose(() => gateway.stop());
  return gateway;
}
