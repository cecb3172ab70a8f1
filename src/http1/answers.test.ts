import { describe, expect, it } from 'vitest';

import { clientErrorRefusal, noUpgrade, refusalText, type ClientError, type Refusal } from './answers.js';

const limits = { headMs: 10_000, requestMs: 300_000 };

describe('clientErrorRefusal', () => {
  const cases: [string, ClientError, Pick<Refusal, 'status' | 'code' | 'message'> | undefined][] = [
    ['a client that reset the connection', { code: 'ECONNRESET' }, undefined],
    ['a client gone as the answer went out', { code: 'EPIPE' }, undefined],
    [
      'a head over the limit',
      { code: 'HPE_HEADER_OVERFLOW', reason: 'Header overflow' },
      {
        status: 431,
        code: 'request_header_fields_too_large',
        message:
          'the request head is over 16 KiB: send fewer or shorter headers (a long value belongs in the body)',
      },
    ],
    [
      'a head or request too slow',
      { code: 'ERR_HTTP_REQUEST_TIMEOUT' },
      {
        status: 408,
        code: 'request_timeout',
        message:
          'the request did not come whole in time (its head is awaited 10 s, all of it 300 s): send each request without pausing',
      },
    ],
    [
      'chunk extensions too long',
      { code: 'HPE_CHUNK_EXTENSIONS_OVERFLOW' },
      {
        status: 413,
        code: 'request_too_large',
        message: 'the chunk extensions of the request body are too long: send the body without them',
      },
    ],
    [
      'TLS bytes',
      {
        code: 'HPE_INVALID_METHOD',
        reason: 'Invalid method encountered',
        rawPacket: Buffer.from('160301', 'hex'),
      },
      {
        status: 400,
        code: 'bad_request',
        message: 'this port speaks plain HTTP, not TLS: use an http:// address',
      },
    ],
    [
      'any other parse error, by its reason',
      {
        code: 'HPE_INVALID_VERSION',
        reason: 'Expected CRLF after version',
        rawPacket: Buffer.from('GET / HTTP/1.1\n'),
      },
      {
        status: 400,
        code: 'bad_request',
        message:
          'the request is not HTTP/1.1 as this server reads it (Expected CRLF after version): send "METHOD /path HTTP/1.1", header lines ended by CRLF, a Host header and one framing of the body (Content-Length or chunked)',
      },
    ],
  ];
  it.each(cases)('answers %s', (_name, e, expected) => {
    const r = clientErrorRefusal(e, limits);
    if (expected === undefined) expect(r).toBeUndefined();
    else expect(r).toMatchObject(expected);
  });
});

describe('refusalText', () => {
  it('is a whole answer that closes: reason phrase, date, JSON in OpenAI’s error shape, its length', () => {
    const text = refusalText({
      status: 503,
      code: 'too_many_connections',
      message: 'too many',
      retryAfterS: 1,
    });
    const [head, body] = text.split('\r\n\r\n') as [string, string];
    const lines = head.split('\r\n');
    expect(lines[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(lines[1]).toMatch(/^date: \w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
    expect(lines.slice(2)).toEqual([
      'content-type: application/json',
      `content-length: ${Buffer.byteLength(body)}`,
      'retry-after: 1',
      'connection: close',
    ]);
    expect(JSON.parse(body)).toEqual({
      error: { message: 'too many', type: 'service_unavailable', param: null, code: 'too_many_connections' },
    });
  });
});

describe('noUpgrade', () => {
  const advice =
    'send other requests without the "Upgrade" and "Connection: upgrade" headers (curl adds them for --http2 on an http:// URL)';
  it.each([
    [
      'a server that takes none',
      '/v1/models',
      [],
      `no protocol upgrade is served at /v1/models: this server takes none; ${advice}`,
    ],
    [
      'a server with one channel',
      '/api/v1/models',
      ['/api/v1/agent/connect'],
      `no protocol upgrade is served at /api/v1/models: only /api/v1/agent/connect takes one; ${advice}`,
    ],
    [
      'two channels',
      '/x',
      ['/a', '/b'],
      `no protocol upgrade is served at /x: only /a, /b take one; ${advice}`,
    ],
    [
      'a long path, cut',
      `/${'p'.repeat(5000)}`,
      [],
      `no protocol upgrade is served at /${'p'.repeat(199)}…: this server takes none; ${advice}`,
    ],
  ])('%s', (_name, path, served, message) => {
    expect(noUpgrade(path, served)).toEqual({ status: 404, code: 'not_found', message });
  });
});
