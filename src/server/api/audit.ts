import { Hono } from 'hono';
import { z } from 'zod';

import type { AuditView, ListOf } from '../../core/api-types.js';
import { formatIssues, LlmgwError } from '../../core/errors.js';
import { issuesFromZod } from '../../core/zod-issues.js';
import type { Store } from '../../store/store.js';
import { adminOnly, type ApiEnv } from './context.js';

export interface AuditRouteDeps {
  store: Pick<Store, 'audit'>;
}

const querySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  before: z.coerce.number().int().min(1).optional(),
  actor: z.string().min(1).optional(),
  target: z.string().min(1).optional(),
  action: z.string().min(1).optional(),
  since: z.iso
    .datetime({ offset: true, error: 'expected an ISO time such as 2026-12-01T09:00:00Z' })
    .optional(),
});

export function auditRoutes(deps: AuditRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', adminOnly);
  app.get('/', async (c) => {
    const parsed = querySchema.safeParse(c.req.query(), { reportInput: true });
    if (!parsed.success) {
      const issues = issuesFromZod(querySchema, parsed.error);
      throw new LlmgwError('invalid_argument', `invalid query:\n${formatIssues(issues)}`, { issues });
    }
    const q = parsed.data;
    const since = q.since === undefined ? undefined : new Date(q.since).toISOString();
    const items = await deps.store.audit.list({ ...q, since });
    return c.json<ListOf<AuditView>>({ items });
  });
  return app;
}
