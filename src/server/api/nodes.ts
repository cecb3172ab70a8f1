import { Hono } from 'hono';
import { z } from 'zod';

import type { ListOf } from '../../core/api-types.js';
import { LlmgwError } from '../../core/errors.js';
import { didYouMean } from '../../core/did-you-mean.js';
import { clientText } from '../../core/redact.js';
import { generateSecret, hashSecret, secretPrefix } from '../../core/secrets.js';
import type { ClusterStatus, CreatedJoinToken, JoinTokenView, NodeView } from '../../protocol/node-views.js';
import type { ControlPlaneView } from '../../protocol/node-views.js';
import type { JoinTokenRecord, Store } from '../../store/store.js';
import type { EventHub } from '../events/event-hub.js';
import type { Fleet } from '../fleets/fleet.js';
import type { AgentHub } from '../nodes/agent-hub.js';
import type { NodeRegistry } from '../nodes/node-registry.js';
import { adminOnly, jsonBody, principalOf, type ApiEnv } from './context.js';

export interface NodeRouteDeps {
  registry: Pick<NodeRegistry, 'views' | 'view' | 'isExternal' | 'forget'>;
  store: Pick<Store, 'nodes'>;
  hub: Pick<AgentHub, 'disconnect'>;
  events?: Pick<EventHub, 'publish'> | undefined;
}

export interface TokenRouteDeps {
  store: Pick<Store, 'joinTokens'>;
  /** Whether agents may join here at all (Kubernetes mode takes none). */
  hub: Pick<AgentHub, 'refusesAgents'>;
}

export interface StatusRouteDeps {
  registry: Pick<NodeRegistry, 'status'>;
  fleet: Pick<Fleet, 'activeDownloads'>;
  /** The control planes on this store, for GET /status (absent: not shown). */
  controlPlanes?: (() => Promise<ControlPlaneView[]>) | undefined;
}

const tokenSchema = z.strictObject({
  name: z
    .string()
    .regex(
      /^[a-z0-9][a-z0-9._-]{0,62}$/,
      'a token name is lower-case letters, digits, ".", "_" and "-" (e.g. "rack-3")',
    )
    .optional(),
  /** Seconds from now; absent: it never expires. */
  expires_in: z
    .int()
    .min(60)
    .max(10 * 365 * 86400)
    .optional(),
});

export function nodeRoutes(deps: NodeRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get('/', (c) => c.json<ListOf<NodeView>>({ items: deps.registry.views() }));

  app.get('/:name', (c) => {
    const name = c.req.param('name');
    const view = deps.registry.view(name);
    if (view === undefined) {
      const near = didYouMean(
        name,
        deps.registry.views().map((v) => v.name),
      );
      throw new LlmgwError(
        'not_found',
        `no node is named "${clientText(name)}"${near === undefined ? '' : `; did you mean "${near}"?`} (llmgw ctl nodes lists them)`,
      );
    }
    return c.json(view);
  });

  app.delete('/:name', adminOnly, async (c) => {
    const name = c.req.param('name');
    if (deps.registry.isExternal(name))
      throw new LlmgwError(
        'invalid_argument',
        `node ${clientText(name)} is a Kubernetes node, which llmgw reads from the cluster: remove it there (kubectl drain ${clientText(name)}, then kubectl delete node ${clientText(name)})`,
      );
    const removed = await deps.store.nodes.remove(name, principalOf(c).name);
    deps.hub.disconnect(removed.id, 'the node was removed from the cluster');
    deps.registry.forget(removed.id);
    deps.events?.publish('nodes', { nodes: [removed.name] });
    return c.json({ name: removed.name, id: removed.id });
  });

  return app;
}

export function tokenRoutes(deps: TokenRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', adminOnly);

  app.get('/', async (c) => {
    const tokens = await deps.store.joinTokens.list({ includeRevoked: c.req.query('revoked') === 'true' });
    return c.json<ListOf<JoinTokenView>>({ items: tokens.map(tokenView) });
  });

  app.post('/', async (c) => {
    const body = await jsonBody(c, tokenSchema);
    const refused = deps.hub.refusesAgents;
    if (refused !== undefined) throw new LlmgwError('precondition_failed', refused);
    const secret = generateSecret('join');
    const name = body.name ?? `token-${secret.slice(-6).toLowerCase()}`;
    const expiresAt =
      body.expires_in === undefined ? null : new Date(Date.now() + body.expires_in * 1000).toISOString();
    const token = await deps.store.joinTokens.create(
      { name, prefix: secretPrefix(secret), secretHash: hashSecret(secret), expiresAt },
      principalOf(c).name,
    );
    return c.json<CreatedJoinToken>({ token: tokenView(token), secret }, 201);
  });

  app.delete('/:name', async (c) =>
    c.json(tokenView(await deps.store.joinTokens.revoke(c.req.param('name'), principalOf(c).name))),
  );
  return app;
}

export function statusRoute(deps: StatusRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.get('/', async (c) => {
    const downloads = deps.fleet.activeDownloads();
    const controlPlanes = await deps.controlPlanes?.();
    return c.json<ClusterStatus>({
      ...deps.registry.status(),
      ...(controlPlanes === undefined ? {} : { control_planes: controlPlanes }),
      ...(downloads.length > 0 ? { downloads } : {}),
    });
  });
  return app;
}

function tokenView(t: JoinTokenRecord): JoinTokenView {
  return {
    name: t.name,
    prefix: t.prefix,
    created_at: t.created_at,
    created_by: t.created_by,
    expires_at: t.expires_at,
    revoked_at: t.revoked_at,
    last_used_at: t.last_used_at,
    uses: t.uses,
  };
}
