import { describe, expect, it } from 'vitest';

import { BodyTooLargeError, RequestAbortedError } from '../http1/fast-request.js';

import type { ClientResponse } from '../http1/client-io.js';
import {
  engineError,
  GatewayError,
  sendEngineError,
  sendError,
  toGatewayError,
  type OpenAiError,
} from './openai-errors.js';
import { cancelled, noReplica, queueFull } from './router/refusals.js';

/** An answer that records what was written. */
function recorder(): ClientResponse & { status?: number; headers?: Record<string, unknown>; body: string } {
  const r = {
    headersSent: false,
    writableFinished: false,
    body: '',
    status: undefined as number | undefined,
    headers: undefined as Record<string, unknown> | undefined,
    writeHead(status: number, headers: Record<string, unknown>) {
      r.status = status;
      r.headers = headers;
      r.headersSent = true;
      return r;
    },
    write(chunk: Buffer | string) {
      r.body += chunk.toString();
      return true;
    },
    end(chunk?: Buffer | string) {
      if (chunk !== undefined) r.body += chunk.toString();
      r.writableFinished = true;
      return r;
    },
    once: () => r,
    destroy: () => r,
  };
  return r;
}

describe('engine errors, normalised to OpenAI’s shape', () => {
  const cases: { engine: string; status: number; body: string; want: OpenAiError }[] = [
    {
      engine: 'llama.cpp, /v1/embeddings without --embeddings (capture 23)',
      status: 501,
      body: '{"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}}',
      want: {
        message: 'This server does not support embeddings. Start it with `--embeddings`',
        type: 'not_supported_error',
        param: null,
        code: 501,
      },
    },
    {
      engine: 'llama.cpp, missing messages (capture 26b)',
      status: 400,
      body: '{"error":{"code":400,"message":"\'messages\' is required","type":"invalid_request_error"}}',
      want: { message: "'messages' is required", type: 'invalid_request_error', param: null, code: 400 },
    },
    {
      engine: 'vLLM, unknown model',
      status: 404,
      body: '{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}',
      want: { message: 'The model `x` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
    },
    {
      engine: 'vLLM and SGLang, a wrong key',
      status: 403,
      body: '{"error":"Unauthorized"}',
      want: { message: 'Unauthorized', type: 'permission_error', param: null, code: null },
    },
    {
      engine: 'SGLang, its top-level error object',
      status: 400,
      body: '{"object":"error","message":"messages: Field required","type":"BadRequestError","param":null,"code":400}',
      want: { message: 'messages: Field required', type: 'BadRequestError', param: null, code: 400 },
    },
    {
      engine: 'FastAPI, detail as text',
      status: 405,
      body: '{"detail":"Method Not Allowed"}',
      want: { message: 'Method Not Allowed', type: 'invalid_request_error', param: null, code: null },
    },
    {
      engine: 'FastAPI, validation errors',
      status: 422,
      body: '{"detail":[{"type":"missing","loc":["body","messages"],"msg":"Field required"},{"loc":["body","n"],"msg":"Input should be a valid integer"}]}',
      want: {
        message: 'body.messages: Field required; body.n: Input should be a valid integer',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    },
    {
      engine: 'OpenAI-style string code',
      status: 400,
      body: '{"error":{"message":"context too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
      want: {
        message: 'context too long',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
    {
      engine: 'a proxy in between, plain text',
      status: 413,
      body: '  Request Entity Too Large\n',
      want: { message: 'Request Entity Too Large', type: 'invalid_request_error', param: null, code: null },
    },
    {
      engine: 'an empty body',
      status: 404,
      body: '',
      want: {
        message: 'the engine answered 404 with no message',
        type: 'not_found_error',
        param: null,
        code: null,
      },
    },
    {
      engine: 'JSON of another shape',
      status: 400,
      body: '{"oops":1}',
      want: {
        message: 'the engine answered 400 with no message',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    },
    {
      engine: 'a message that is not text',
      status: 400,
      body: '{"error":{"message":{"why":"nested"},"type":7,"code":1.5e400}}',
      want: { message: '{"why":"nested"}', type: 'invalid_request_error', param: null, code: null },
    },
  ];
  for (const c of cases) {
    it(c.engine, () => {
      expect(engineError(c.status, c.body)).toEqual(c.want);
    });
  }

  it('keeps a client’s answer short and free of keys, whatever the engine echoes', () => {
    const key = 'llmgw_key_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345';
    const e = engineError(
      400,
      JSON.stringify({
        error: { message: `bad model ${key} ${'z'.repeat(100_000)}`, type: 't'.repeat(500) },
      }),
    );
    expect(e.message).not.toContain(key);
    expect(e.message.length).toBeLessThan(2100);
    expect(e.type).toHaveLength(100);
  });

  it('answers an engine refusal with its status and OpenAI’s shape; a 501 tells clients not to retry', () => {
    const res = recorder();
    sendEngineError(res, {
      status: 501,
      error: engineError(
        501,
        '{"error":{"code":501,"message":"Start it with `--embeddings`","type":"not_supported_error"}}',
      ),
      requestId: 'r1',
      replica: 'tiny-1',
    });
    expect(res.status).toBe(501);
    expect(res.headers).toMatchObject({
      'x-request-id': 'r1',
      'x-llmgw-replica': 'tiny-1',
      'x-should-retry': 'false',
      'content-type': 'application/json',
    });
    expect(JSON.parse(res.body)).toEqual({
      error: { message: 'Start it with `--embeddings`', type: 'not_supported_error', param: null, code: 501 },
    });
    const bad = recorder();
    sendEngineError(bad, {
      status: 400,
      error: engineError(400, '{"error":"x"}'),
      requestId: 'r2',
      replica: 'tiny-1',
    });
    expect(bad.headers?.['x-should-retry']).toBeUndefined();
  });
});

describe('gateway failures, turned into refusals in one place', () => {
  const ctx = { model: 'tiny', maxBodyBytes: 256 * 1024 };

  it('keeps its own refusals as they are', () => {
    const e = new GatewayError('model_not_found', 'no such model', { param: 'model' });
    expect(toGatewayError(e, ctx)).toBe(e);
  });

  it('says how large a body may be', () => {
    const e = toGatewayError(new BodyTooLargeError(256 * 1024), ctx);
    expect(e).toMatchObject({ code: 'request_too_large', status: 413 });
    expect(e.message).toBe(
      'the request body is over 0.25 MiB: send a smaller one (images as URLs rather than inline), or raise gateway.max_body_mb',
    );
  });

  it('takes a client gone before its body came whole as the client’s doing, not a bug of the gateway', () => {
    const unexpected: unknown[] = [];
    const onUnexpected = (e: unknown) => unexpected.push(e);
    const nodeAborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    for (const cause of [new RequestAbortedError('the client closed its side'), nodeAborted]) {
      const e = toGatewayError(cause, { ...ctx, onUnexpected });
      expect(e).toMatchObject({ code: 'invalid_request', status: 400 });
      expect(e.message).toBe(
        'the request body did not come whole: the client closed the connection before sending all of it',
      );
    }
    expect(unexpected).toEqual([]);
  });

  it('tells a model that may come up (retry) from one that will not (final, with its reason)', () => {
    const waiting = toGatewayError(noReplica('tiny'), ctx);
    expect(waiting).toMatchObject({ code: 'no_ready_replica', status: 503, retryAfterS: 10, final: false });
    expect(waiting.message).toBe('no replica of tiny is ready: llmgw ctl replicas tiny says why');
    const down = toGatewayError(noReplica('tiny'), {
      ...ctx,
      unavailable: 'replica tiny-1 failed: exited with code 1',
    });
    expect(down).toMatchObject({
      code: 'no_ready_replica',
      status: 503,
      retryAfterS: undefined,
      final: true,
    });
    expect(down.message).toBe(
      'no replica of tiny can serve: replica tiny-1 failed: exited with code 1 (llmgw ctl replicas tiny says more)',
    );
    const tried = toGatewayError(noReplica('tiny'), { ...ctx, lastFailure: 'tiny-1 answered 500' });
    expect(tried).toMatchObject({ code: 'upstream_error', status: 502 });
    expect(tried.message).toBe('every replica of tiny tried failed: tiny-1 answered 500');
    const busy = toGatewayError(queueFull('tiny', 3, 5), ctx);
    expect(busy).toMatchObject({ code: 'no_ready_replica', retryAfterS: 5 });
    expect(toGatewayError(cancelled('tiny'), ctx).code).toBe('no_ready_replica');
  });

  it('hides anything unexpected from the client and hands it to the log', () => {
    const seen: unknown[] = [];
    const bug = new TypeError('x is undefined');
    const e = toGatewayError(bug, { ...ctx, onUnexpected: (u) => seen.push(u) });
    expect(e).toMatchObject({
      code: 'upstream_error',
      status: 502,
      message: 'the gateway failed on this request; see its log for the request id',
    });
    expect(seen).toEqual([bug]);
  });

  it('writes Retry-After, x-should-retry and Connection: close where they belong', () => {
    const a = recorder();
    sendError(a, new GatewayError('rate_limit_exceeded', 'slow down', { retryAfterS: 0.2 }), 'id-1');
    expect(a.status).toBe(429);
    expect(a.headers).toMatchObject({ 'retry-after': 1, 'x-request-id': 'id-1' });
    expect(JSON.parse(a.body)).toEqual({
      error: { message: 'slow down', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
    });
    const b = recorder();
    sendError(b, new GatewayError('no_ready_replica', 'down', { final: true }), 'id-2');
    expect(b.headers?.['retry-after']).toBeUndefined();
    expect(b.headers?.['x-should-retry']).toBe('false');
    const c = recorder();
    sendError(c, toGatewayError(new BodyTooLargeError(1), ctx), 'id-3');
    expect(c.headers?.['connection']).toBe('close');
    const d = recorder();
    sendError(d, new GatewayError('permission_denied', 'no'), 'id-4');
    expect(d.status).toBe(403);
    expect(JSON.parse(d.body).error.type).toBe('permission_error');
  });
});
