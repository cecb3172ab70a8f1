import { Hono } from 'hono';
import { z } from 'zod';

import type { CreatedKey, KeyView, ListOf } from '../../core/api-types.js';
import { LlmgwError } from '../../core/errors.js';
import { generateSecret, hashSecret, secretPrefix } from '../../core/secrets.js';
import type { ApiKeyRecord } from '../../store/store.js';
import { systemActor } from '../admin-key.js';
import { adminOnly, jsonBody, principalOf, type ApiDeps, type ApiEnv } from './context.js';

const keyName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'a key name is lower-case letters, digits, ".", "_" and "-", starting with a letter or digit (e.g. "ci-bot")')
  .refine((n) => n !== systemActor, `"${systemActor}" is reserved for changes llmgw makes itself: pick another name`);

const createKeySchema = z.strictObject({
  name: keyName,
  role: z.enum(['admin', 'user']).default('user'),
});

export function keyRoutes(deps: ApiDeps): Hono<ApiEnv> {
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
    const key = await deps.store.keys.create({ name: body.name, role: body.role, prefix: secretPrefix(secret), secretHash: hashSecret(secret) }, principalOf(c).name);
    return c.json<CreatedKey>({ key: keyView(key), secret }, 201);
  });

  app.delete('/:name', async (c) => {
    const name = c.req.param('name');
    if (name === principalOf(c).name) {
      throw new LlmgwError('conflict', `key "${name}" is the one making this request: revoke it with another admin key, so that one stays usable`);
    }
    const key = await deps.store.keys.revoke(name, principalOf(c).name);
    deps.auth.forget();
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
  };
}
