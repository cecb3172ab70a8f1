import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { probe, probeCases, RawConnection } from '../../test/support/raw-http.js';
import { nodeRequest, type ClientResponse, type GatewayRequest } from './client-io.js';

import { HttpServer } from './http-server.js';

/** A lane as the gateway is one: the key is checked from the head (after a turn, as a store lookup takes), the body read after. */
function lane(req: GatewayRequest, res: ClientResponse): void {
  const send = (status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  void Promise.resolve().then(async () => {
    if (req.headers['authorization'] !== 'Bearer good') {
      send(401, { error: { code: 'invalid_api_key', message: 'no key' } });
    } else if (req.method === 'GET' || req.method === 'HEAD') {
      send(200, { object: 'list', data: [] });
    } else {
      // Rejected when the client went away or was too slow: the HTTP layer answered it.
      const body = await req.body(2 << 20).catch(() => undefined);
      if (body !== undefined) send(200, { got: body.length });
    }
  });
}

describe('HttpServer', () => {
  let http: HttpServer;
  let port: number;

  beforeAll(async () => {
    http = new HttpServer({ headMs: 300, requestMs: 600, maxConnectionsPerClient: 100 });
    http.fastLane('/v1/', {
      maxBodyBytes: 2 << 20,
      handler: lane,
      fallback: (req, res) => lane(nodeRequest(req), res),
    });
    http.mount('/api/', (req: IncomingMessage, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': 11 });
        res.end('{"ok":true}');
      });
    });
    // A refusal from the head, as a body limit answers a Content-Length over it: the body is never read.
    http.mount('/refuse/', (_req: IncomingMessage, res) => {
      res.writeHead(413, { 'content-type': 'application/json', 'content-length': 2 });
      res.end('{}');
    });
    port = Number(new URL(await http.listen('127.0.0.1:0')).port);
  });
  afterAll(async () => {
    await http.close(100);
  });

  const api = 'GET /api/v1/health HTTP/1.1\r\nHost: t\r\n\r\n';

  it('answers CONNECT 400 with why, and closes (node:http would drop the connection unanswered)', async () => {
    const conn = await RawConnection.open('127.0.0.1', port);
    try {
      await conn.write(['CONNECT /v1/ HTTP/1.1\r\nHost: t\r\n\r\n']);
      const a = await conn.answer();
      expect(a.status).toBe(400);
      expect(JSON.parse(a.body)).toMatchObject({
        error: {
          code: 'bad_request',
          message:
            'CONNECT is not served: llmgw is no proxy; send requests to the API under /api/v1 or the gateway under /v1',
        },
      });
      expect(await conn.closesWithin(1000)).toBe(true);
    } finally {
      conn.socket.destroy();
    }
  });

  // The probe's cases: one answer, and one close behaviour, whether the front door reads the
  // request (first on its connection) or node:http does (after an /api request handed the
  // connection to it).
  it.each(probeCases({ path: '/v1/models', key: 'good' }).map((c) => [c.name, c] as const))(
    '%s: the same answer first on a connection and after an /api request',
    async (_name, c) => {
      const o = { host: '127.0.0.1', port, c, closeWithinMs: 5000, next: api };
      const [first, after] = await Promise.all([probe(o), probe({ ...o, first: api })]);
      expect(first).toEqual({ status: c.status ?? first.status, code: c.code, closes: c.closes });
      expect(after).toEqual(first);
    },
  );

  it('refuses a request without Host with a message, whichever reads it', async () => {
    for (const first of [undefined, api]) {
      const conn = await RawConnection.open('127.0.0.1', port);
      if (first !== undefined) {
        await conn.write([first]);
        await conn.answer();
      }
      await conn.write(['GET /v1/models HTTP/1.1\r\nAuthorization: Bearer good\r\n\r\n']);
      const a = await conn.answer();
      expect(a.status).toBe(400);
      expect(a.headers['connection']).toBe('close');
      expect(JSON.parse(a.body)).toEqual({
        error: {
          message:
            'the request has no Host header, which HTTP/1.1 requires (RFC 9112, 3.2): send one, e.g. "Host: 127.0.0.1:8080"',
          type: 'invalid_request_error',
          param: null,
          code: 'bad_request',
        },
      });
      await conn.closed;
    }
  });

  it.each([
    [
      'a head over 16 KiB',
      `GET /v1/models HTTP/1.1\r\nHost: t\r\nAccept: ${'b'.repeat(20_000)}\r\n\r\n`,
      431,
      'Request Header Fields Too Large',
      'the request head is over 16 KiB: send fewer or shorter headers (a long value belongs in the body)',
    ],
    [
      'TLS bytes',
      Buffer.from('16030100f5010000f1030312345678', 'hex'),
      400,
      'Bad Request',
      'this port speaks plain HTTP, not TLS: use an http:// address',
    ],
    [
      'a bare LF',
      'GET /v1/models HTTP/1.1\nHost: t\n\n',
      400,
      'Bad Request',
      'the request is not HTTP/1.1 as this server reads it (Expected CRLF after version): send "METHOD /path HTTP/1.1", header lines ended by CRLF, a Host header and one framing of the body (Content-Length or chunked)',
    ],
  ] as const)(
    'answers %s after an /api request with a reason phrase and a message',
    async (_name, bytes, status, reason, message) => {
      const conn = await RawConnection.open('127.0.0.1', port);
      await conn.write([api]);
      await conn.answer();
      await conn.write([bytes]);
      const a = await conn.answer();
      expect(a.status).toBe(status);
      expect(a.headers['connection']).toBe('close');
      expect(JSON.parse(a.body)).toMatchObject({ error: { message } });
      await conn.closed;
      // The reason phrase, as node:http writes it.
      const raw = await RawConnection.open('127.0.0.1', port);
      const line = new Promise<string>((resolve) =>
        raw.socket.once('data', (d: Buffer) => resolve(d.toString('latin1').split('\r\n')[0] ?? '')),
      );
      await raw.write([bytes]);
      expect(await line).toBe(`HTTP/1.1 ${status} ${reason}`);
    },
  );

  it('answers node:http requests whose body it did not read with Connection: close, and closes', async () => {
    const conn = await RawConnection.open('127.0.0.1', port);
    await conn.write([api]);
    await conn.answer();
    // A chunked body is node:http's to read; the lane refuses it from its head.
    await conn.write([
      `POST /v1/models HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n${'x'.repeat(0x8000)}`,
    ]);
    const a = await conn.answer();
    expect(a.status).toBe(401);
    expect(a.headers['connection']).toBe('close');
    await conn.closed;
  });

  it('reads on and drops the body of a node:http request it refused unread, so the client gets no reset', async () => {
    // A client that writes its whole body before reading (as fetch does), its side kept open
    // after the server's ends: closed at once with the body unread, the server would reset it.
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    const events: string[] = [];
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('end', () => events.push('end'));
    socket.on('error', (e: NodeJS.ErrnoException) => events.push(`error ${e.code ?? e.message}`));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    const size = 4 << 20;
    socket.write(
      `PUT /refuse/it HTTP/1.1\r\nHost: t\r\nContent-Length: ${size}\r\n\r\n${'x'.repeat(1 << 16)}`,
    );
    await new Promise<void>((resolve) => socket.once('end', resolve));
    socket.end(Buffer.alloc(size - (1 << 16), 'x'));
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 413 [^]*connection: close/i);
    expect(events).toEqual(['end']);
  });
});
