import { clientText } from '../core/redact.js';
import { BodyTooLargeError, RequestAbortedError } from '../http1/fast-request.js';

import type { ClientResponse } from '../http1/client-io.js';
import { RouterError } from './router/types.js';

/**
 * Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, which every
 * OpenAI client library reads. The one place a gateway failure becomes an answer: the
 * gateway's own refusals (GatewayError), whatever else a request threw (toGatewayError),
 * and engines' own refusals, whose bodies differ by engine (engineError).
 */
export interface OpenAiError {
  message: string;
  type: string;
  param: string | null;
  /** The gateway's codes are words; an engine's own code (llama.cpp's 501) is kept as it sent it. */
  code: string | number | null;
}

export type GatewayErrorCode =
  | 'invalid_api_key'
  | 'permission_denied'
  | 'model_not_allowed'
  | 'model_not_found'
  | 'invalid_json'
  | 'invalid_request'
  | 'request_too_large'
  | 'rate_limit_exceeded'
  | 'no_ready_replica'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'not_found';

const statusOf: Record<GatewayErrorCode, number> = {
  invalid_api_key: 401,
  permission_denied: 403,
  model_not_allowed: 403,
  model_not_found: 404,
  invalid_json: 400,
  invalid_request: 400,
  request_too_large: 413,
  rate_limit_exceeded: 429,
  no_ready_replica: 503,
  upstream_error: 502,
  upstream_timeout: 504,
  not_found: 404,
};

const typeOf: Record<GatewayErrorCode, string> = {
  invalid_api_key: 'authentication_error',
  permission_denied: 'permission_error',
  model_not_allowed: 'permission_error',
  model_not_found: 'invalid_request_error',
  invalid_json: 'invalid_request_error',
  invalid_request: 'invalid_request_error',
  request_too_large: 'invalid_request_error',
  rate_limit_exceeded: 'rate_limit_error',
  no_ready_replica: 'service_unavailable',
  upstream_error: 'api_error',
  upstream_timeout: 'timeout_error',
  not_found: 'invalid_request_error',
};

export interface GatewayErrorOptions {
  /** Seconds until a retry may succeed: sent as `Retry-After`. */
  retryAfterS?: number;
  param?: string;
  /** Sending it again will not help (OpenAI's clients read `x-should-retry: false` and show the error at once). */
  final?: boolean;
}

/** A refusal of the gateway's own, with a stable code; its status and type follow from the code. */
export class GatewayError extends Error {
  readonly code: GatewayErrorCode;
  readonly retryAfterS: number | undefined;
  readonly param: string | null;
  readonly final: boolean;
  constructor(code: GatewayErrorCode, message: string, options: GatewayErrorOptions = {}) {
    super(message);
    this.name = 'GatewayError';
    this.code = code;
    this.retryAfterS = options.retryAfterS;
    this.param = options.param ?? null;
    this.final = options.final ?? false;
  }

  get status(): number {
    return statusOf[this.code];
  }
}

/** What the gateway knew of a request when it failed: what its answer says. */
export interface FailureContext {
  /** The catalog model asked for, once known. */
  model?: string | undefined;
  /** Why the last replica tried failed, once one was tried. */
  lastFailure?: string | undefined;
  /** Why no replica of the model can become ready (the route table's word), when none can. */
  unavailable?: string | undefined;
  /** The largest body taken. */
  maxBodyBytes: number;
  /** Told of anything thrown that is not a refusal (a bug): the client gets no detail of it. */
  onUnexpected?: (e: unknown) => void;
}

/** Anything a request threw, as the refusal its client gets. */
export function toGatewayError(e: unknown, ctx: FailureContext): GatewayError {
  if (e instanceof GatewayError) return e;
  if (e instanceof BodyTooLargeError) {
    const mib = Math.round((ctx.maxBodyBytes / 1024 / 1024) * 100) / 100;
    return new GatewayError(
      'request_too_large',
      `the request body is over ${mib} MiB: send a smaller one (images as URLs rather than inline), or raise gateway.max_body_mb`,
    );
  }
  if (e instanceof RouterError) return routerRefusal(e, ctx);
  // The client went away while its body came (the front door's word, or node:http's): no bug of ours.
  if (e instanceof RequestAbortedError || isAborted(e))
    return new GatewayError(
      'invalid_request',
      'the request body did not come whole: the client closed the connection before sending all of it',
    );
  ctx.onUnexpected?.(e);
  return new GatewayError(
    'upstream_error',
    'the gateway failed on this request; see its log for the request id',
  );
}

/** node:http's error for a request whose connection closed before its body ended. */
function isAborted(e: unknown): boolean {
  return (
    e instanceof Error && ((e as NodeJS.ErrnoException).code === 'ECONNRESET' || e.message === 'aborted')
  );
}

/** Every replica tried failed (each answered 5xx before any byte, or refused the connection). */
export function allFailed(model: string, lastFailure: string | undefined): GatewayError {
  return new GatewayError(
    'upstream_error',
    `every replica of ${model} tried failed: ${lastFailure ?? 'no answer'}`,
  );
}

function routerRefusal(e: RouterError, ctx: FailureContext): GatewayError {
  const model = ctx.model ?? 'the model';
  const r = e.refusal;
  if (r.kind === 'no-replica') {
    if (ctx.lastFailure !== undefined) return allFailed(model, ctx.lastFailure);
    // Nothing will come up by itself: say why now, rather than have clients retry for nothing.
    if (ctx.unavailable !== undefined)
      return new GatewayError(
        'no_ready_replica',
        `no replica of ${model} can serve: ${ctx.unavailable} (llmgw ctl replicas ${model} says more)`,
        { final: true },
      );
    return new GatewayError(
      'no_ready_replica',
      `no replica of ${model} is ready: llmgw ctl replicas ${model} says why`,
      { retryAfterS: 10 },
    );
  }
  // The client left while it waited: nobody reads this, but a 503 still says when to retry.
  if (r.kind === 'cancelled') return new GatewayError('no_ready_replica', r.message, { retryAfterS: 1 });
  // Busy, or restarting: it comes back by itself, so never final.
  return new GatewayError('no_ready_replica', r.message, { retryAfterS: r.retryAfterS });
}

/** The gateway's refusal, answered. */
export function sendError(res: ClientResponse, e: GatewayError, requestId: string): void {
  const headers: Record<string, string | number> = {};
  if (e.retryAfterS !== undefined) headers['retry-after'] = Math.max(1, Math.ceil(e.retryAfterS));
  // An oversized body is left unread: the connection cannot carry another request.
  if (e.code === 'request_too_large') headers['connection'] = 'close';
  writeError(res, {
    status: e.status,
    error: { message: e.message, type: typeOf[e.code], param: e.param, code: e.code },
    requestId,
    headers,
    final: e.final,
  });
}

/** The gateway's refusal as the last event of a stream already open (OpenAI's streams carry errors so). */
export function sseError(e: GatewayError): string {
  return `data: ${JSON.stringify({ error: { message: e.message, type: typeOf[e.code], param: e.param, code: e.code } })}\n\n`;
}

/** An engine's refusal (4xx, or 501 for what it was not started to do), answered in OpenAI's shape. */
export function sendEngineError(
  res: ClientResponse,
  o: { status: number; error: OpenAiError; requestId: string; replica: string },
): void {
  // 501 is final: the engine was not started to do it, and every replica of the model runs alike.
  writeError(res, {
    status: o.status,
    error: o.error,
    requestId: o.requestId,
    headers: { 'x-llmgw-replica': o.replica },
    final: o.status === 501,
  });
}

function writeError(
  res: ClientResponse,
  o: {
    status: number;
    error: OpenAiError;
    requestId: string;
    headers: Record<string, string | number>;
    final: boolean;
  },
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: o.error });
  const headers: Record<string, string | number> = {
    ...o.headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-request-id': o.requestId,
  };
  if (o.final) headers['x-should-retry'] = 'false';
  res.writeHead(o.status, headers);
  res.end(body);
}

/** OpenAI's error types by status, for engines that send none. */
const engineTypes: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'invalid_request_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error',
  501: 'not_supported_error',
};

/** Most of an engine's message a client is shown. */
const engineMessageMax = 2000;
const engineWordMax = 100;

/**
 * An engine's error body, whatever its shape, as OpenAI's: llama.cpp and vLLM send
 * `{"error": {"message", "type", "code"}}`, SGLang `{"object": "error", "message", ...}`,
 * both `{"error": "Unauthorized"}` for a wrong key, FastAPI `{"detail": ...}`, and a proxy
 * in between may send plain text. The engine's message, type and code are kept.
 */
export function engineError(status: number, body: string): OpenAiError {
  const fallbackType = engineTypes[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  const parsed = parseObject(body);
  const inner = parsed?.['error'];
  const fields = isObject(inner)
    ? inner
    : parsed !== undefined && (typeof parsed['message'] === 'string' || parsed['object'] === 'error')
      ? parsed
      : undefined;
  let message: string | undefined;
  if (fields !== undefined) message = text(fields['message']);
  else if (typeof inner === 'string') message = inner;
  else if (parsed !== undefined) message = detailOf(parsed['detail']);
  else message = body.trim();
  const code = fields?.['code'];
  return {
    message:
      message === undefined || message === ''
        ? `the engine answered ${status} with no message`
        : clientText(message, engineMessageMax),
    type: word(fields?.['type']) ?? fallbackType,
    param: word(fields?.['param']) ?? null,
    code: typeof code === 'number' && Number.isFinite(code) ? code : (word(code) ?? null),
  };
}

/**
 * An engine's 5xx for a request it could not take while it answers its health check (the
 * request was the problem: llama.cpp answers 500 to `"tools": 5` or an image for a text
 * model): the caller's error, a 400 in OpenAI's shape with the engine's own words.
 */
export function engineRefusal(status: number, body: string): OpenAiError {
  return { ...engineError(status, body), type: 'invalid_request_error', code: null };
}

function parseObject(body: string): Record<string, unknown> | undefined {
  if (!body.trimStart().startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(body);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function text(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v === undefined || v === null) return undefined;
  return JSON.stringify(v);
}

/** A short name (a type, a param, a code), or undefined. */
function word(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v.slice(0, engineWordMax) : undefined;
}

/** FastAPI's `detail`: a message, or a list of `{loc, msg}`. */
function detailOf(detail: unknown): string | undefined {
  if (typeof detail === 'string') return detail;
  if (!Array.isArray(detail)) return undefined;
  const parts = detail.map((d) => {
    if (!isObject(d)) return text(d) ?? '';
    const loc = Array.isArray(d['loc']) ? d['loc'].map(String).join('.') : undefined;
    const msg = text(d['msg']) ?? JSON.stringify(d);
    return loc === undefined ? msg : `${loc}: ${msg}`;
  });
  return parts.join('; ');
}
