import type { Context, MiddlewareHandler } from 'hono';
import type { z } from 'zod';

import type { Principal } from '../../auth/authenticator.js';
import { requireRole } from '../../auth/authenticator.js';
import { formatIssues, LlmgwError } from '../../core/errors.js';
import { issuesFromZod } from '../../core/zod-issues.js';

/**
 * What every route of the API shares: the request's principal and id, and the checks of a
 * body. What each route reads of the control plane it declares itself (its `...RouteDeps`).
 */
export interface ApiEnv {
  Variables: { principal: Principal; requestId: string };
}

export type ApiContext = Context<ApiEnv>;

export function principalOf(c: ApiContext): Principal {
  return c.get('principal');
}

/** Lets the route on only with an admin key. */
export const adminOnly: MiddlewareHandler<ApiEnv> = async (c, next) => {
  requireRole(principalOf(c), 'admin');
  await next();
};

/** The JSON body, checked against a strict schema: unknown fields are refused by name. */
export async function jsonBody<T extends z.ZodType>(c: ApiContext, schema: T): Promise<z.output<T>> {
  const raw = await rawJson(c);
  const parsed = schema.safeParse(raw, { reportInput: true });
  if (!parsed.success) {
    const issues = issuesFromZod(schema, parsed.error);
    throw new LlmgwError('invalid_argument', `invalid request body:\n${formatIssues(issues)}`, { issues });
  }
  return parsed.data;
}

/**
 * The JSON body of a partial change (PATCH): checked as jsonBody does, and refused when it
 * names no field to change, saying which can.
 */
export async function changeBody<T extends z.ZodObject>(
  c: ApiContext,
  schema: T,
  example: string,
): Promise<z.output<T>> {
  const body = await jsonBody(c, schema);
  refuseEmptyChange(body, Object.keys(schema.shape), example);
  return body;
}

/**
 * A change with nothing in it would change nothing (and an update with nothing to set is no
 * statement a database takes): refused at the edge, naming the fields that can change.
 * Unknown fields are left to the body's own validation, which names them.
 */
export function refuseEmptyChange(body: object, fields: readonly string[], example: string): void {
  if (Object.values(body).some((v) => v !== undefined)) return;
  throw new LlmgwError(
    'invalid_argument',
    `nothing to change: the body names none of the fields that can change (${fields.join(', ')}); send at least one, e.g. ${example}`,
  );
}

/** The body as JSON of any shape, for bodies validated further in (models). */
export async function rawJson(c: ApiContext): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/(?:[\w.+-]+\+)?json\b/i.test(type)) {
    throw new LlmgwError(
      'unsupported_media_type',
      `send the body as JSON with "Content-Type: application/json" (got "${type || 'none'}")`,
    );
  }
  const text = await c.req.text();
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new LlmgwError('invalid_argument', `the body is not valid JSON: ${(e as Error).message}`);
  }
}

/** `If-Match: "3"` as a model version. */
export function ifMatchVersion(c: ApiContext): number | undefined {
  const header = c.req.header('if-match');
  if (header === undefined) return undefined;
  const m = /^(?:W\/)?"?(\d+)"?$/.exec(header.trim());
  if (m?.[1] === undefined)
    throw new LlmgwError('invalid_argument', `If-Match must be a model version such as "3" (got ${header})`);
  return Number(m[1]);
}
