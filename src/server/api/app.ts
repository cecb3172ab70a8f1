import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';

import type { Authenticator, Principal } from '../../auth/authenticator.js';
import type { HealthView, WhoAmI } from '../../core/api-types.js';
import { bearerToken } from '../../core/bearer.js';
import { LlmgwError, messageOf } from '../../core/errors.js';
import { clientText } from '../../core/redact.js';
import { requestIdFrom } from '../../core/request-id.js';
import { apiPrefix } from '../../protocol/api-paths.js';
import type { Store } from '../../store/store.js';
import type { EventHub } from '../events/event-hub.js';
import { checkJoinToken } from '../nodes/join-token.js';
import type { TrafficSampler } from '../traffic/traffic-sampler.js';
import { auditRoutes, type AuditRouteDeps } from './audit.js';
import { autoscaleRoutes, type AutoscaleRouteDeps } from './autoscale.js';
import { cacheRoutes, modelFileRoutes, type CacheRouteDeps, type ModelFileRouteDeps } from './cache.js';
import { configRoutes, type ConfigRouteDeps } from './config.js';
import { principalOf, type ApiEnv } from './context.js';
import { errorResponse } from './errors.js';
import { eventsRoute } from './events.js';
import { gatewayRoutes, usageRoutes, type GatewayRouteDeps, type UsageRouteDeps } from './gateway-routes.js';
import { keyRoutes, type KeyRouteDeps } from './keys.js';
import { modelRoutes, type ModelRouteDeps } from './models.js';
import {
  nodeRoutes,
  statusRoute,
  tokenRoutes,
  type NodeRouteDeps,
  type StatusRouteDeps,
  type TokenRouteDeps,
} from './nodes.js';
import { planRoutes, type PlanRouteDeps } from './plan.js';
import { replicaRoutes, scaleRoute, type ReplicaRouteDeps, type ScaleRouteDeps } from './replicas.js';
import { trafficRoute } from './traffic.js';

/** What the API itself reads, around its routes: logging, health, keys. */
interface ApiFrame {
  logger: Logger;
  version: string;
  store: Pick<Store, 'ping' | 'dialect' | 'joinTokens'>;
  auth: Pick<Authenticator, 'authenticate'>;
  /** Changes told to the clients of GET /events (absent: the route is not served). */
  events?: EventHub | undefined;
  /** GET /events' heartbeat (tests shorten it). */
  eventsOptions?: { heartbeatMs?: number } | undefined;
  /** The gateway's rates over time (GET /traffic; absent: not served). */
  traffic?: TrafficSampler | undefined;
}

/**
 * What the control plane gives the API: no more than the sum of what its routes declare.
 * Each route is handed the whole object but typed to read only its own part.
 */
export type ApiOptions = ApiFrame &
  AuditRouteDeps &
  AutoscaleRouteDeps &
  CacheRouteDeps &
  ConfigRouteDeps &
  GatewayRouteDeps &
  KeyRouteDeps &
  ModelFileRouteDeps &
  ModelRouteDeps &
  NodeRouteDeps &
  PlanRouteDeps &
  ReplicaRouteDeps &
  ScaleRouteDeps &
  StatusRouteDeps &
  TokenRouteDeps &
  UsageRouteDeps;

/** The control plane's API under /api/v1: JSON, every route but health behind a key. */
export function createApi(deps: ApiOptions) {
  const app = new Hono<ApiEnv>().basePath(apiPrefix);

  app.use('*', async (c, next) => {
    const requestId = requestIdFrom(c.req.header('x-request-id'));
    c.set('requestId', requestId);
    c.header('X-Request-Id', requestId);
    const started = performance.now();
    await next();
    deps.logger.info(
      {
        requestId,
        method: c.req.method,
        path: clientText(c.req.path),
        status: c.res.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
        key: (c.get('principal') as Principal | undefined)?.name,
      },
      'api request',
    );
  });
  app.onError((err, c) => errorResponse(c, err, deps.logger));
  app.notFound((c) =>
    errorResponse(
      c,
      new LlmgwError(
        'not_found',
        `no API route ${c.req.method} ${clientText(c.req.path)} (llmgw ctl --help lists what the API offers)`,
      ),
      deps.logger,
    ),
  );
  app.use(
    '*',
    bodyLimit({
      maxSize: 1024 * 1024,
      onError: () => {
        throw new LlmgwError('payload_too_large', 'the request body is too large: the API takes up to 1 MiB');
      },
    }),
  );

  app.get('/health', async (c) => {
    try {
      await deps.store.ping();
      return c.json<HealthView>({ status: 'ok', version: deps.version, store: deps.store.dialect });
    } catch (e) {
      return c.json<HealthView>(
        {
          status: 'unavailable',
          version: deps.version,
          store: deps.store.dialect,
          error: `the store does not answer: ${messageOf(e)}`,
        },
        503,
      );
    }
  });

  // For llmgw doctor: is this join token good, before an agent tries it?
  app.get('/agent/token', async (c) => {
    const secret = bearerToken(c.req.header('authorization'));
    if (secret === undefined)
      throw new LlmgwError('unauthenticated', 'send the join token as "Authorization: Bearer TOKEN"');
    const token = await checkJoinToken(deps.store, secret, Date.now());
    return c.json({ name: token.name, expires_at: token.expires_at });
  });

  app.use('*', async (c, next) => {
    const principal = await deps.auth.authenticate(c.req.header('authorization'));
    c.set('principal', principal);
    // A scraper's key reads /metrics; of the API it may only ask who it is.
    if (principal.role === 'metrics' && c.req.path !== `${apiPrefix}/whoami`) {
      throw new LlmgwError(
        'permission_denied',
        `key "${principal.name}" has the metrics role, which reads /metrics only: use a user or admin key for the API`,
      );
    }
    await next();
  });

  app.get('/whoami', (c) => {
    const p = principalOf(c);
    return c.json<WhoAmI>({ name: p.name, role: p.role });
  });
  app.route('/models', scaleRoute(deps));
  app.route('/models', autoscaleRoutes(deps));
  // Before the catalog's routes: DELETE /models/NAME?purge=true is answered there.
  app.route('/models', modelFileRoutes(deps));
  app.route('/cache', cacheRoutes(deps));
  app.route('/models', modelRoutes(deps));
  app.route('/replicas', replicaRoutes(deps));
  app.route('/keys', keyRoutes(deps));
  app.route('/audit', auditRoutes(deps));
  app.route('/config', configRoutes(deps));
  app.route('/nodes', nodeRoutes(deps));
  app.route('/node-tokens', tokenRoutes(deps));
  app.route('/status', statusRoute(deps));
  app.route('/plan', planRoutes(deps));
  app.route('/gateway', gatewayRoutes(deps));
  app.route('/usage', usageRoutes(deps));
  if (deps.events !== undefined)
    app.route('/events', eventsRoute({ events: deps.events, ...deps.eventsOptions }));
  if (deps.traffic !== undefined) app.route('/traffic', trafficRoute(deps.traffic));
  return app;
}
