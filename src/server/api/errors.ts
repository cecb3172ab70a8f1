import type { Context } from 'hono';
import type { Logger } from 'pino';

import type { ErrorBody } from '../../core/api-types.js';
import { formatPath, isLlmgwError, LlmgwError } from '../../core/errors.js';
import { redact } from '../../core/redact.js';
import { storeUnreachable } from '../../store/unreachable.js';

/**
 * The one place an error becomes an API response. Refusals keep their code and
 * message; anything unexpected is logged in full and answered with a request id only,
 * so no internals (or secrets) reach the client.
 */
export function errorResponse(c: Context, error: unknown, logger: Logger): Response {
  const e = normalise(error);
  if (e.code === 'internal') {
    const requestId = (c.get('requestId') as string | undefined) ?? 'unknown';
    logger.error(
      {
        err: {
          message: redact(messageWithCause(error)),
          stack: error instanceof Error ? redact(error.stack ?? '') : undefined,
        },
        requestId,
      },
      'internal error',
    );
  }
  const body: ErrorBody = { error: { code: e.code, message: redact(e.message) } };
  if (e.issues.length > 0) {
    body.error.issues = e.issues.map((i) => ({
      path: formatPath(i.path),
      message: i.message,
      ...(i.line === undefined ? {} : { line: i.line }),
    }));
  }
  // The rest of an oversized body is never read: the connection cannot carry another request.
  if (e.code === 'payload_too_large') c.header('Connection', 'close');
  return c.json(body, e.status as 400);
}

function normalise(error: unknown): LlmgwError {
  if (isLlmgwError(error)) return error;
  // Hono's body limit and malformed requests arrive as HTTPException with a status.
  const status = (error as { status?: unknown } | null)?.status;
  if (status === 413)
    return new LlmgwError('payload_too_large', 'the request body is too large (the API takes up to 1 MiB)');
  // The client went away while its body was read: its fault, not ours, and nobody reads the answer.
  if (clientGone(error))
    return new LlmgwError(
      'invalid_argument',
      'the request body did not come whole: the client closed the connection before sending all of it',
    );
  if (storeUnreachable(error))
    return new LlmgwError(
      'unavailable',
      'the database did not answer, so this was not done (or not confirmed): try again shortly, or through another control plane; llmgw ctl status shows them',
    );
  const requestId = 'see the control plane log';
  return new LlmgwError(
    'internal',
    `internal error (${requestId}); nothing was changed unless the response said so`,
  );
}

/** node:http's error for a request whose connection closed before its body ended. */
function clientGone(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = e.cause) {
    if ((e as NodeJS.ErrnoException).code === 'ECONNRESET' || e.message === 'aborted') return true;
  }
  return false;
}

function messageWithCause(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  return e.cause === undefined ? e.message : `${e.message}: ${messageWithCause(e.cause)}`;
}
