import { Hono } from 'hono';
import { z } from 'zod';

import { roles, type CreatedKey, type KeyView, type ListOf } from '../../core/api-types.js';
import { LlmgwError } from '../../core/errors.js';
import { generateSecret, hashSecret, secretPrefix } from '../../core/secrets.js';
import type { Authenticator } from '../../auth/authenticator.js';
import type { ApiKeyRecord, Store } from '../../store/store.js';
import type { EventHub } from '../events/event-hub.js';
import { systemActor } from '../state/admin-key.js';
import { adminOnly, changeBody, jsonBody, principalOf, type ApiEnv } from './context.js';

export interface KeyRouteDeps {
  store: Pick<Store, 'keys'>;
  /** Forgets the keys it read, so a changed or revoked key takes effect at once. */
  auth: Pick<Authenticator, 'forget'>;
  events?: Pick<EventHub, 'publish'> | undefined;
}

const keyName = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9._-]{0,62}$/,
    'a key name is lower-case letters, digits, ".", "_" and "-", starting with a letter or digit (e.g. "ci-bot")',
  )
  .refine(
    (n) => n !== systemActor,
    `"${systemActor}" is reserved for changes llmgw makes itself: pick another name`,
  );

const limits = {
  /** Models the key may use through the gateway (catalog names; `MODEL:ADAPTER` is covered by MODEL). */
  models: z.array(z.string().min(1)).min(1).nullable().optional(),
  rpm: z.int().min(1).nullable().optional(),
  tpm: z.int().min(1).nullable().optional(),
};

const createKeySchema = z.strictObject({
  name: keyName,
  role: z.enum(roles).default('user'),
  ...limits,
});

const updateKeySchema = z.strictObject(limits);

export function keyRoutes(deps: KeyRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', adminOnly);

  app.get('/', async (c) => {
    const includeRevoked = c.req.query('revoked') === 'true';
    const keys = await deps.store.keys.list({ includeRevoked });
    return c.json<ListOf<KeyView>>({ items: keys.map(keyView) });
  });

  app.post('/', async (c) => {
    const body = await jsonBody(c, createKeySchema);
    const secret = generateSecret('key');
    const key = await deps.store.keys.create(
      {
        name: body.name,
        role: body.role,
        prefix: secretPrefix(secret),
        secretHash: hashSecret(secret),
        allowed_models: body.models ?? null,
        rpm: body.rpm ?? null,
        tpm: body.tpm ?? null,
      },
      principalOf(c).name,
    );
    deps.events?.publish('keys', { keys: [key.name] });
    return c.json<CreatedKey>({ key: keyView(key), secret }, 201);
  });

  app.patch('/:name', async (c) => {
    const body = await changeBody(c, updateKeySchema, '{"rpm": 60}');
    const key = await deps.store.keys.setLimits(
      c.req.param('name'),
      {
        ...(body.models === undefined ? {} : { allowed_models: body.models }),
        ...(body.rpm === undefined ? {} : { rpm: body.rpm }),
        ...(body.tpm === undefined ? {} : { tpm: body.tpm }),
      },
      principalOf(c).name,
    );
    deps.auth.forget();
    deps.events?.publish('keys', { keys: [key.name] });
    return c.json(keyView(key));
  });

  app.delete('/:name', async (c) => {
    const name = c.req.param('name');
    if (name === principalOf(c).name) {
      throw new LlmgwError(
        'conflict',
        `key "${name}" is the one making this request: revoke it with another admin key, so that one stays usable`,
      );
    }
    const key = await deps.store.keys.revoke(name, principalOf(c).name);
    deps.auth.forget();
    deps.events?.publish('keys', { keys: [key.name] });
    return c.json(keyView(key));
  });

  return app;
}

export function keyView(k: ApiKeyRecord): KeyView {
  return {
    name: k.name,
    role: k.role,
    prefix: k.prefix,
    created_at: k.created_at,
    created_by: k.created_by,
    revoked_at: k.revoked_at,
    revoked_by: k.revoked_by,
    last_used_at: k.last_used_at,
    allowed_models: k.allowed_models,
    rpm: k.rpm,
    tpm: k.tpm,
  };
}
