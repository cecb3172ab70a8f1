import { Hono, type MiddlewareHandler } from 'hono';
import { z } from 'zod';

import { LlmgwError } from '../../core/errors.js';
import { formatIssues } from '../../core/errors.js';
import { issuesFromZod } from '../../core/zod-issues.js';
import type { KeyInfo, RouteTable } from '../../protocol/routes.js';
import type { GatewayLoadReport, WakeAnswer } from '../../protocol/load-report.js';
import type { Authenticator } from '../../auth/authenticator.js';
import type { Store, UsageDelta } from '../../store/store.js';
import type { Autoscaler } from '../autoscale/autoscaler.js';
import type { EventHub } from '../events/event-hub.js';
import type { Fleet } from '../fleets/fleet.js';
import { StoreUsage } from '../services/store-usage.js';
import { wakeBody } from './autoscale.js';
import { adminOnly, jsonBody, principalOf, type ApiEnv } from './context.js';

export interface GatewayRouteDeps {
  fleet: Pick<Fleet, 'routeTable'>;
  auth: Pick<Authenticator, 'byHash'>;
  store: Pick<Store, 'usage'>;
  /** Absent: load reports and wake-ups are refused (this control plane runs no autoscaler). */
  autoscaler?: Pick<Autoscaler, 'report' | 'wake'> | undefined;
  events?: Pick<EventHub, 'publish'> | undefined;
}

export interface UsageRouteDeps {
  store: Pick<Store, 'usage'>;
}

/** Gateways of their own call these with a key of role `gateway` (or admin). */
const gatewayOnly: MiddlewareHandler<ApiEnv> = async (c, next) => {
  const p = principalOf(c);
  if (p.role !== 'gateway' && p.role !== 'admin') {
    throw new LlmgwError(
      'permission_denied',
      `this is for gateways: key "${p.name}" has the ${p.role} role (make one with llmgw ctl key create NAME --role gateway)`,
    );
  }
  await next();
};

const keySchema = z.strictObject({
  secret_hash: z.string().regex(/^[0-9a-f]{64}$/, 'the SHA-256 of the key, 64 hex digits'),
});
const usageSchema = z.strictObject({
  rows: z
    .array(
      z.strictObject({
        key_name: z.string().min(1),
        model: z.string().min(1),
        hour: z.iso.datetime(),
        requests: z.int().min(0),
        prompt_tokens: z.int().min(0),
        completion_tokens: z.int().min(0),
      }),
    )
    .max(100_000),
});
const usageQuery = z.strictObject({
  key: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  since: z.iso
    .datetime({ offset: true, error: 'expected an ISO time such as 2026-12-01T09:00:00Z' })
    .optional(),
});

const count = () => z.number().min(0);
const loadSchema = z.strictObject({
  gateway: z.string().min(1).max(200),
  at: z.number().int().min(0),
  models: z
    .array(
      z.strictObject({
        model: z.string().min(1),
        queued: count(),
        inFlight: count(),
        requests: count(),
        lastRequestAt: z.number().int().min(0).optional(),
        coldStart: z.strictObject({ ms: count(), at: z.number().int().min(0) }).optional(),
        replicas: z
          .array(
            z.strictObject({
              id: z.string().min(1),
              running: count(),
              waiting: count(),
              kvUsage: z.number().min(0).max(1).optional(),
              capacity: count(),
              inFlight: count(),
              stale: z.boolean(),
            }),
          )
          .max(10_000),
      }),
    )
    .max(10_000),
}) satisfies z.ZodType<GatewayLoadReport>;

export function gatewayRoutes(deps: GatewayRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const usage = new StoreUsage(deps.store.usage, deps.events);
  app.use('*', gatewayOnly);
  app.get('/routes', async (c) => c.json<RouteTable>(await deps.fleet.routeTable()));
  app.post('/keys', async (c) => {
    const { secret_hash } = await jsonBody(c, keySchema);
    const p = await deps.auth.byHash(secret_hash);
    return c.json<KeyInfo>({
      name: p.name,
      role: p.role,
      allowed_models: p.allowedModels,
      rpm: p.rpm,
      tpm: p.tpm,
    });
  });
  // The gateway's load, every second or so, for the autoscaler.
  app.post('/load', async (c) => {
    const report = await jsonBody(c, loadSchema);
    await autoscalerOf(deps).report(report);
    return c.json({ ok: true });
  });
  // A request waits for a model at zero: start one.
  app.post('/wake', async (c) => {
    const { model } = await jsonBody(c, wakeBody);
    return c.json<WakeAnswer>(await autoscalerOf(deps).wake(model));
  });
  app.post('/usage', async (c) => {
    const { rows } = await jsonBody(c, usageSchema);
    await usage.write(rows.map((r) => ({ ...r, hour: new Date(r.hour).toISOString() })));
    return c.json({ written: rows.length });
  });
  return app;
}

function autoscalerOf(deps: GatewayRouteDeps): NonNullable<GatewayRouteDeps['autoscaler']> {
  if (deps.autoscaler === undefined)
    throw new LlmgwError(
      'unavailable',
      'this control plane runs no autoscaler: send load reports to one that does',
    );
  return deps.autoscaler;
}

export function usageRoutes(deps: UsageRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', adminOnly);
  app.get('/', async (c) => {
    const parsed = usageQuery.safeParse(c.req.query(), { reportInput: true });
    if (!parsed.success) {
      const issues = issuesFromZod(usageQuery, parsed.error);
      throw new LlmgwError('invalid_argument', `invalid query:\n${formatIssues(issues)}`, { issues });
    }
    const { key, model, since } = parsed.data;
    const items: UsageDelta[] = await deps.store.usage.list({
      key,
      model,
      since: since === undefined ? undefined : new Date(since).toISOString(),
    });
    return c.json({ items });
  });
  return app;
}
