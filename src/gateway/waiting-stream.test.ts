import { describe, expect, it } from 'vitest';

import type { ClientResponse } from '../http1/client-io.js';

import { errorEvent, WaitingStream } from './waiting-stream.js';

/** A response that records what reached the client. */
function recorder() {
  const out = { heads: [] as [number, Record<string, unknown>][], body: '', ended: false };
  const res: ClientResponse = {
    get headersSent() {
      return out.heads.length > 0;
    },
    get writableFinished() {
      return out.ended;
    },
    writeHead: (status, headers) => out.heads.push([status, headers]),
    write: (chunk) => {
      out.body += chunk.toString();
      return true;
    },
    end: (chunk) => {
      if (chunk !== undefined) out.body += chunk.toString();
      out.ended = true;
    },
    once: () => undefined,
    destroy: () => undefined,
  };
  return { out, res };
}

describe('a stream opened while the request waits', () => {
  it('passes the engine’s stream through under the head already sent, and retries stay possible until then', () => {
    const { out, res } = recorder();
    const s = new WaitingStream(res);
    s.open({ model: 'm', requestId: 'r1', everyMs: 60_000, now: () => 0 });
    expect(out.heads).toEqual([
      [200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-request-id': 'r1' }],
    ]);
    expect(out.body).toBe(': waiting for a replica of m to start (0 s)\n\n');
    expect(s.headersSent).toBe(false);
    s.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    expect(s.headersSent).toBe(true);
    s.write('data: {"x":1}\n\n');
    s.end('data: [DONE]\n\n');
    expect(out.heads).toHaveLength(1);
    expect(out.body).toBe(': waiting for a replica of m to start (0 s)\n\ndata: {"x":1}\n\ndata: [DONE]\n\n');
  });

  it('ends with an error event for any answer that is not a stream', () => {
    const { out, res } = recorder();
    const s = new WaitingStream(res);
    s.open({ model: 'm', requestId: 'r1', everyMs: 60_000 });
    s.writeHead(503, { 'content-type': 'application/json' });
    s.end(
      '{"error":{"message":"no replica of m became ready","type":"service_unavailable","param":null,"code":"no_ready_replica"}}',
    );
    expect(out.body.split('\n\n')[1]).toBe(
      'data: {"error":{"message":"no replica of m became ready","type":"service_unavailable","param":null,"code":"no_ready_replica"}}',
    );
  });

  it('turns each kind of answer into OpenAI’s error event', () => {
    const cases: [number, string, unknown][] = [
      [
        400,
        '{"object":"error","message":"messages: Field required","type":"BadRequestError","param":null,"code":400}',
        { message: 'messages: Field required', type: 'BadRequestError', param: null, code: 400 },
      ],
      [502, 'Bad Gateway', { message: 'Bad Gateway', type: 'api_error', param: null, code: null }],
      [
        200,
        '{"choices":[]}',
        {
          message: 'the replica answered 200 without a stream to a streamed request',
          type: 'api_error',
          param: null,
          code: 'upstream_error',
        },
      ],
    ];
    for (const [status, body, error] of cases)
      expect(errorEvent(status, body)).toBe(`data: ${JSON.stringify({ error })}\n\n`);
  });
});
