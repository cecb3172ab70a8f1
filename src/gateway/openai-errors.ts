import type { ClientResponse } from './client-io.js';

/**
 * Errors in OpenAI's shape, `{"error": {"message", "type", "code", "param"}}`, which
 * every OpenAI client library reads; written in this one place.
 */
export type GatewayErrorCode =
  | 'invalid_api_key'
  | 'model_not_allowed'
  | 'model_not_found'
  | 'invalid_json'
  | 'invalid_request'
  | 'request_too_large'
  | 'rate_limit_exceeded'
  | 'no_ready_replica'
  | 'upstream_error'
  | 'not_found';

const statusOf: Record<GatewayErrorCode, number> = {
  invalid_api_key: 401,
  model_not_allowed: 403,
  model_not_found: 404,
  invalid_json: 400,
  invalid_request: 400,
  request_too_large: 413,
  rate_limit_exceeded: 429,
  no_ready_replica: 503,
  upstream_error: 502,
  not_found: 404,
};

const typeOf: Record<GatewayErrorCode, string> = {
  invalid_api_key: 'authentication_error',
  model_not_allowed: 'permission_error',
  model_not_found: 'invalid_request_error',
  invalid_json: 'invalid_request_error',
  invalid_request: 'invalid_request_error',
  request_too_large: 'invalid_request_error',
  rate_limit_exceeded: 'rate_limit_error',
  no_ready_replica: 'service_unavailable',
  upstream_error: 'api_error',
  not_found: 'invalid_request_error',
};

export class GatewayError extends Error {
  readonly code: GatewayErrorCode;
  readonly retryAfterS: number | undefined;
  readonly param: string | null;
  constructor(code: GatewayErrorCode, message: string, options: { retryAfterS?: number; param?: string } = {}) {
    super(message);
    this.name = 'GatewayError';
    this.code = code;
    this.retryAfterS = options.retryAfterS;
    this.param = options.param ?? null;
  }

  get status(): number {
    return statusOf[this.code];
  }
}

export function sendError(res: ClientResponse, e: GatewayError, requestId: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { message: e.message, type: typeOf[e.code], param: e.param, code: e.code } });
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-request-id': requestId,
  };
  if (e.retryAfterS !== undefined) headers['retry-after'] = Math.max(1, Math.ceil(e.retryAfterS));
  // An oversized body is left unread: the connection cannot carry another request.
  if (e.code === 'request_too_large') headers['connection'] = 'close';
  res.writeHead(e.status, headers);
  res.end(body);
}
