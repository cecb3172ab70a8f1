import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import {
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net';

import { afterEach, describe, expect, it } from 'vitest';

import { gate, sleep, until } from '../../test/support/timing.js';

import {
  UpstreamPool,
  type UpstreamCall,
  type UpstreamPoolOptions,
  type UpstreamRequest,
} from './upstream-pool.js';

/** What a handler saw of one exchange, in order. */
interface Seen {
  events: string[];
  status: number | undefined;
  headers: Record<string, string> | undefined;
  pieces: Buffer[];
  error: Error | undefined;
  answered: boolean | undefined;
}

interface Hooks {
  onHead?: (call: UpstreamCall, status: number) => void;
  onData?: (call: UpstreamCall, piece: Buffer) => void;
}

const serversToClose: (() => Promise<void>)[] = [];
const pools: UpstreamPool[] = [];

afterEach(async () => {
  // Servers first: their sockets' close ends any exchange still busy, so the pools close at once.
  for (const close of serversToClose.splice(0)) await close();
  // A pool whose exchange hangs (a failing test) must not hang the hook.
  await Promise.all(pools.splice(0).map((p) => Promise.race([p.close(), sleep(500)])));
});

function listen(server: NetServer | HttpServer): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

interface Upstream {
  url: string;
  port: number;
  /** The server side of every connection, in the order they came. */
  sockets: Socket[];
  /** Requests as the server read them. */
  requests: {
    method: string;
    url: string;
    headers: IncomingMessage['headers'];
    body: string;
    socket: number;
  }[];
}

/** A real node:http server; `handle` answers after the request's body was read. */
async function httpUpstream(
  handle: (req: IncomingMessage, res: ServerResponse, body: string) => void,
  keepAliveTimeout = 5000,
): Promise<Upstream> {
  const sockets: Socket[] = [];
  const requests: Upstream['requests'] = [];
  const server = createHttpServer({ keepAliveTimeout }, (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString();
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        socket: sockets.indexOf(req.socket),
      });
      handle(req, res, body);
    });
  });
  server.on('connection', (s: Socket) => sockets.push(s));
  const port = await listen(server);
  serversToClose.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${port}`, port, sockets, requests };
}

/** A raw TCP server, for answers node:http would not write: `onRequest` gets each chunk a connection sends. */
async function rawUpstream(
  onRequest: (socket: Socket, index: number, data: Buffer) => void,
): Promise<{ url: string; sockets: Socket[]; received: string[] }> {
  const sockets: Socket[] = [];
  const received: string[] = [];
  const server = createNetServer((s) => {
    const index = sockets.length;
    sockets.push(s);
    s.on('error', () => undefined);
    s.on('data', (d: Buffer) => {
      received.push(d.toString('latin1'));
      onRequest(s, index, d);
    });
  });
  const port = await listen(server);
  serversToClose.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${port}`, sockets, received };
}

function newPool(url: string, options?: UpstreamPoolOptions): UpstreamPool {
  const pool = new UpstreamPool(url, options);
  pools.push(pool);
  return pool;
}

/** Sends a request; `done` settles at the handler's onEnd or onError. */
function send(
  pool: UpstreamPool,
  req: Partial<UpstreamRequest> = {},
  hooks: Hooks = {},
): { call: UpstreamCall; seen: Seen; done: Promise<Seen> } {
  const seen: Seen = {
    events: [],
    status: undefined,
    headers: undefined,
    pieces: [],
    error: undefined,
    answered: undefined,
  };
  let settle: (s: Seen) => void = () => undefined;
  const done = new Promise<Seen>((resolve) => (settle = resolve));
  const call: UpstreamCall = pool.request(
    {
      method: req.method ?? 'POST',
      path: req.path ?? '/v1/test',
      headers: req.headers ?? {},
      body: req.body ?? '',
    },
    {
      onHead: (status, headers) => {
        seen.events.push(`head ${status}`);
        seen.status = status;
        seen.headers = headers;
        hooks.onHead?.(call, status);
      },
      onData: (piece) => {
        seen.events.push(`data ${piece.toString('latin1')}`);
        seen.pieces.push(piece);
        hooks.onData?.(call, piece);
      },
      onEnd: () => {
        seen.events.push('end');
        settle(seen);
      },
      onError: (error, answered) => {
        seen.events.push(`error ${answered}`);
        seen.error = error;
        seen.answered = answered;
        settle(seen);
      },
    },
  );
  return { call, seen, done };
}

const bodyOf = (seen: Seen): string => Buffer.concat(seen.pieces).toString();
const closed = (s: Socket): Promise<void> =>
  s.destroyed ? Promise.resolve() : new Promise((resolve) => s.once('close', () => resolve()));

describe('UpstreamPool', () => {
  it('refuses an endpoint that is not http or https, or has a query or a user', () => {
    expect(() => new UpstreamPool('ftp://127.0.0.1:1')).toThrow(
      'ftp://127.0.0.1:1: an upstream is http:// or https://',
    );
    expect(() => new UpstreamPool('https://u@127.0.0.1:1/r/x?y=1')).toThrow(
      'https://u@127.0.0.1:1/r/x?y=1: an upstream is a scheme, host, port and path, with no query or user',
    );
  });

  it('puts the endpoint’s path before each request’s', async () => {
    const up = await httpUpstream((req, res) => {
      res.writeHead(200, { 'Content-Length': String(Buffer.byteLength(req.url ?? '')) });
      res.end(req.url);
    });
    const pool = new UpstreamPool(`${up.url}/r/tiny-1/`);
    const got = await new Promise<string>((resolve, reject) => {
      let body = '';
      pool.request(
        { method: 'GET', path: '/v1/models', headers: {}, body: '' },
        {
          onHead: () => undefined,
          onData: (d) => (body += d.toString()),
          onEnd: () => resolve(body),
          onError: reject,
        },
      );
    });
    expect(got).toBe('/r/tiny-1/v1/models');
    await pool.close();
  });

  it('sends the request with host and length, and reads a Content-Length answer', async () => {
    const up = await httpUpstream((_req, res) => {
      res.writeHead(201, { 'Content-Type': 'application/json', 'Content-Length': '11', 'X-Engine': 'test' });
      res.end('{"ok":true}');
    });
    const pool = newPool(up.url);
    const body = '{"prompt":"caf\u00e9 \u2603"}';
    const seen = await send(pool, {
      method: 'POST',
      path: '/v1/completions?x=1',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k' },
      body,
    }).done;
    expect(seen.events).toEqual(['head 201', 'data {"ok":true}', 'end']);
    expect(seen.headers?.['content-type']).toBe('application/json');
    expect(seen.headers?.['x-engine']).toBe('test');
    expect(seen.headers?.['content-length']).toBe('11');
    expect(up.requests).toHaveLength(1);
    const r = up.requests[0];
    expect(r?.method).toBe('POST');
    expect(r?.url).toBe('/v1/completions?x=1');
    expect(r?.body).toBe(body);
    expect(r?.headers['host']).toBe(`127.0.0.1:${up.port}`);
    expect(r?.headers['content-length']).toBe(String(Buffer.byteLength(body)));
    expect(r?.headers['authorization']).toBe('Bearer k');
    expect(pool.connections).toEqual({ busy: 0, idle: 1 });
  });

  it.each([
    [
      'a CR LF in a value',
      { headers: { 'x-request-id': 'a\r\nInjected: b' } },
      'the value of header x-request-id holds a character HTTP does not allow there (U+000D)',
    ],
    [
      'a lone LF in a value',
      { headers: { accept: 'a\nb' } },
      'the value of header accept holds a character HTTP does not allow there (U+000A)',
    ],
    [
      'a NUL in a value',
      { headers: { authorization: 'Bearer a\u0000b' } },
      'the value of header authorization holds a character HTTP does not allow there (U+0000)',
    ],
    [
      'a DEL in a value',
      { headers: { accept: 'a\u007f' } },
      'the value of header accept holds a character HTTP does not allow there (U+007F)',
    ],
    [
      'a character past U+00FF in a value',
      { headers: { accept: 'snow \u2603' } },
      'the value of header accept holds a character HTTP does not allow there (U+2603)',
    ],
    ['a space in a name', { headers: { 'x a': 'b' } }, 'the header name "x a" is not an HTTP token'],
    ['a space in the target', { path: '/v1/a b' }, 'the target "/v1/a b" is not a path of visible ASCII'],
    ['a method that is not a token', { method: 'PO ST' }, 'the method "PO ST" is not an HTTP token'],
  ] as const)(
    'never writes a head with %s: the request fails before any byte is sent',
    async (_name, req, problem) => {
      const up = await rawUpstream(() => undefined);
      const pool = newPool(up.url);
      const seen = await send(pool, req).done;
      expect(seen.events).toEqual(['error false']);
      expect(seen.error?.message).toBe(`not sent to ${new URL(up.url).host}: ${problem}`);
      expect(up.sockets).toHaveLength(0);
      expect(pool.connections).toEqual({ busy: 0, idle: 0 });
    },
  );

  it('sends values past 0x7F (obs-text) as the Latin-1 bytes they were read as, with a UTF-8 body', async () => {
    const up = await rawUpstream((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    const pool = newPool(up.url);
    const body = Buffer.from('{"x":"\u2603"}');
    await send(pool, { headers: { accept: 'caf\u00e9' }, body: body.toString() }).done;
    const bytes = Buffer.from(up.received.join(''), 'latin1');
    expect(bytes.includes(Buffer.from('accept: caf\u00e9\r\n', 'latin1'))).toBe(true);
    expect(bytes.subarray(bytes.length - body.length).equals(body)).toBe(true);
  });

  it('sends a large Buffer body whole', async () => {
    const up = await httpUpstream((_req, res, body) => res.end(`got ${body.length}`));
    const pool = newPool(up.url);
    const big = Buffer.alloc(200 * 1024, 0x7a);
    const seen = await send(pool, { body: big }).done;
    expect(bodyOf(seen)).toBe(`got ${big.length}`);
    expect(up.requests[0]?.body).toBe(big.toString());
    expect(up.requests[0]?.headers['content-length']).toBe(String(big.length));
  });

  it('delivers a chunked answer written in several pieces as data, in order', async () => {
    const pieces = ['first ', 'second ', 'third'];
    const got = [gate(), gate(), gate()];
    const up = await httpUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      void (async () => {
        for (let i = 0; i < pieces.length; i++) {
          res.write(pieces[i]);
          // The next piece goes out once the client has this one: each comes in its own read.
          await got[i]?.wait;
        }
        res.end();
      })();
    });
    const pool = newPool(up.url);
    const { done } = send(pool, {}, { onData: (_c, piece) => got[pieces.indexOf(piece.toString())]?.open() });
    const seen = await done;
    expect(seen.headers?.['transfer-encoding']).toBe('chunked');
    expect(seen.events).toEqual(['head 200', 'data first ', 'data second ', 'data third', 'end']);
    // The chunked answer ended cleanly: the connection is kept.
    expect(pool.connections).toEqual({ busy: 0, idle: 1 });
  });

  it('reuses one kept connection for sequential requests', async () => {
    const up = await httpUpstream((req, res) => res.end(`answer to ${req.url}`));
    const pool = newPool(up.url);
    for (let i = 0; i < 5; i++) {
      const seen = await send(pool, { path: `/r${i}` }).done;
      expect(bodyOf(seen)).toBe(`answer to /r${i}`);
    }
    expect(up.sockets).toHaveLength(1);
    expect(up.requests.map((r) => r.socket)).toEqual([0, 0, 0, 0, 0]);
    expect(pool.connections).toEqual({ busy: 0, idle: 1 });
  });

  it('opens a connection per request running at the same time, and keeps them all', async () => {
    const release = gate();
    const up = await httpUpstream((req, res) => void release.wait.then(() => res.end(req.url)));
    const pool = newPool(up.url);
    const calls = [send(pool, { path: '/a' }), send(pool, { path: '/b' }), send(pool, { path: '/c' })];
    expect(pool.connections).toEqual({ busy: 3, idle: 0 });
    await until('three requests', () => up.requests.length === 3);
    release.open();
    const seen = await Promise.all(calls.map((c) => c.done));
    expect(seen.map(bodyOf)).toEqual(['/a', '/b', '/c']);
    expect(up.sockets).toHaveLength(3);
    expect(pool.connections).toEqual({ busy: 0, idle: 3 });
  });

  it('does not reuse a connection whose answer said connection: close', async () => {
    const up = await httpUpstream((_req, res) => {
      res.setHeader('Connection', 'close');
      res.end('bye');
    });
    const pool = newPool(up.url);
    for (let i = 0; i < 3; i++) {
      const seen = await send(pool).done;
      expect(seen.events).toEqual(['head 200', 'data bye', 'end']);
      expect(seen.headers?.['connection']).toBe('close');
      expect(pool.connections.idle).toBe(0);
      await until('the connection to close', () => pool.connections.busy === 0);
    }
    expect(up.sockets).toHaveLength(3);
  });

  it('reads an answer without a length to the close of its connection', async () => {
    const up = await rawUpstream((s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nhello ');
      setTimeout(() => s.end('world'), 20);
    });
    const pool = newPool(up.url);
    const seen = await send(pool).done;
    expect(bodyOf(seen)).toBe('hello world');
    expect(seen.events.at(-1)).toBe('end');
    expect(seen.error).toBeUndefined();
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('reads the answer to a HEAD without a body, and keeps the connection', async () => {
    const up = await httpUpstream((_req, res) => {
      res.writeHead(200, { 'content-length': '1234' });
      res.end();
    });
    const pool = newPool(up.url);
    const head = await send(pool, { method: 'HEAD' }).done;
    expect(head.events).toEqual(['head 200', 'end']);
    expect(head.headers?.['content-length']).toBe('1234');
    const next = await send(pool, { method: 'HEAD' }).done;
    expect(next.events).toEqual(['head 200', 'end']);
    expect(up.sockets).toHaveLength(1);
  });

  it('reports a refused connection as an error before any answer', async () => {
    const probe = createNetServer();
    const port = await listen(probe);
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const pool = newPool(`http://127.0.0.1:${port}`);
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['error false']);
    expect((seen.error as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('reports a server that closes in the middle of the body as an error after the answer began', async () => {
    const up = await rawUpstream((s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc');
      setTimeout(() => s.end(), 20);
    });
    const pool = newPool(up.url);
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['head 200', 'data abc', 'error true']);
    expect(seen.error?.message).toMatch(/closed before the answer ended/);
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('reports a server that closes in the middle of a chunked body as an error', async () => {
    const up = await rawUpstream((s) => {
      s.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n5\r\nde');
      setTimeout(() => s.destroy(), 20);
    });
    const seen = await send(newPool(up.url)).done;
    expect(seen.events).toEqual(['head 200', 'data abc', 'data de', 'error true']);
  });

  it('reports an answer that is not HTTP as an error before any answer', async () => {
    const up = await rawUpstream((s) => s.write('SSH-2.0-OpenSSH\r\n\r\n'));
    const pool = newPool(up.url);
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['error false']);
    expect(seen.error?.message).toMatch(/not well-formed/);
    await until(
      'the connection to close',
      () => up.sockets[0]?.destroyed === true || up.sockets[0]?.readableEnded === true,
    );
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('reports an answer head over 16 KiB as an error before any answer', async () => {
    const up = await rawUpstream((s) => s.write(`HTTP/1.1 200 OK\r\nx-big: ${'b'.repeat(17 * 1024)}\r\n`));
    const seen = await send(newPool(up.url)).done;
    expect(seen.events).toEqual(['error false']);
    expect(seen.error?.message).toMatch(/over 16 KiB/);
  });

  it('reports broken chunked framing as an error after the answer began, and drops the connection', async () => {
    const up = await rawUpstream((s) =>
      s.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n'),
    );
    const pool = newPool(up.url);
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['head 200', 'data abc', 'error true']);
    expect(seen.error?.message).toMatch(/chunked framing is broken/);
    await closed(up.sockets[0] as Socket);
    await until('the connection to close', () => pool.connections.busy === 0);
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('does not reuse a connection that sent bytes past the end of its answer', async () => {
    const up = await rawUpstream((s) => s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA'));
    const pool = newPool(up.url);
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['head 200', 'data ok', 'end']);
    expect(pool.connections.idle).toBe(0);
    await closed(up.sockets[0] as Socket);
    await send(pool).done;
    expect(up.sockets).toHaveLength(2);
  });

  it('abort() closes the connection and no callback follows', async () => {
    const answering = gate();
    let serverSocketClosed: Promise<void> | undefined;
    const up = await httpUpstream((req, res) => {
      serverSocketClosed = closed(req.socket);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('start');
      void answering.wait.then(() => {
        if (!res.destroyed) res.end('more');
      });
    });
    const pool = newPool(up.url);
    const aborted = gate();
    const { seen } = send(
      pool,
      {},
      {
        onData: (call) => {
          call.abort();
          aborted.open();
        },
      },
    );
    await aborted.wait;
    await serverSocketClosed;
    answering.open();
    await sleep(50);
    expect(seen.events).toEqual(['head 200', 'data start']);
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('abort() from onHead delivers no data, even with body bytes read with the head', async () => {
    const up = await rawUpstream((s) => s.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello'));
    const pool = newPool(up.url);
    const { seen } = send(pool, {}, { onHead: (call) => call.abort() });
    await until(
      'the server side to close',
      () => up.sockets[0]?.readableEnded === true || up.sockets[0]?.destroyed === true,
    );
    await sleep(30);
    expect(seen.events).toEqual(['head 200']);
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('abort() before the answer closes the connection the request went out on', async () => {
    const up = await rawUpstream(() => undefined);
    const pool = newPool(up.url);
    const { call, seen } = send(pool);
    await until('the request', () => up.received.length > 0);
    call.abort();
    await closed(up.sockets[0] as Socket);
    call.abort();
    await sleep(30);
    expect(seen.events).toEqual([]);
  });

  it('retries once on a new connection when a kept one was closed by the server as the request went out', async () => {
    const up = await httpUpstream((req, res) => res.end(`answer to ${req.url}`));
    const pool = newPool(up.url);
    expect(bodyOf(await send(pool, { path: '/first' }).done)).toBe('answer to /first');
    expect(pool.connections).toEqual({ busy: 0, idle: 1 });
    // The server drops the idle connection; the pool has not heard of it when the next request goes.
    up.sockets[0]?.destroy();
    const seen = await send(pool, { path: '/second' }).done;
    expect(seen.events).toEqual(['head 200', 'data answer to /second', 'end']);
    expect(up.sockets).toHaveLength(2);
    expect(up.requests.map((r) => [r.url, r.socket])).toEqual([
      ['/first', 0],
      ['/second', 1],
    ]);
  });

  it('retries once when a kept connection closes on the request without answering', async () => {
    let requests = 0;
    const up = await rawUpstream((s, index) => {
      requests++;
      // The first connection answers once, then closes on the next request as if it had timed out.
      if (index === 0 && requests > 1) s.destroy();
      else s.write(`HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n${index}`);
    });
    const pool = newPool(up.url);
    expect(bodyOf(await send(pool).done)).toBe('0');
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['head 200', 'data 1', 'end']);
    expect(up.sockets).toHaveLength(2);
    expect(requests).toBe(3);
  });

  it('does not retry a second time: a new connection that also fails is reported', async () => {
    const up = await rawUpstream((s, index) => {
      if (index === 0) s.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx');
      else s.destroy();
    });
    const pool = newPool(up.url);
    await send(pool).done;
    // The kept connection goes away under the request; the retry's connection closes too.
    up.sockets[0]?.destroy();
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['error false']);
    expect(up.sockets).toHaveLength(2);
  });

  it('does not retry a request whose connection had sent part of an answer', async () => {
    let requests = 0;
    const up = await rawUpstream((s) => {
      requests++;
      if (requests === 1) s.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx');
      else s.end('HTTP/1.1 200 OK\r\ncontent-len');
    });
    const pool = newPool(up.url);
    await send(pool).done;
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['error false']);
    expect(requests).toBe(2);
    expect(up.sockets).toHaveLength(1);
  });

  it('opens a new connection after the server closed an idle one on its keep-alive timeout', async () => {
    const up = await httpUpstream((req, res) => res.end(req.url), 50);
    const pool = newPool(up.url);
    expect(bodyOf(await send(pool, { path: '/one' }).done)).toBe('/one');
    await until('the server to close the idle connection', () => pool.connections.idle === 0);
    expect(bodyOf(await send(pool, { path: '/two' }).done)).toBe('/two');
    expect(up.sockets).toHaveLength(2);
  });

  it('closes its idle connections after idleMs', async () => {
    const up = await httpUpstream((_req, res) => res.end('ok'));
    const pool = newPool(up.url, { idleMs: 10 });
    await send(pool).done;
    expect(pool.connections.idle).toBe(1);
    await Promise.race([
      closed(up.sockets[0] as Socket),
      sleep(2500).then(() => Promise.reject(new Error('still open'))),
    ]);
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });

  it('skips a 100 Continue that comes in its own write', async () => {
    const up = await rawUpstream((s) => {
      s.write('HTTP/1.1 100 Continue\r\n\r\n');
      setTimeout(() => s.write('HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ndone'), 20);
    });
    const pool = newPool(up.url);
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['head 200', 'data done', 'end']);
    expect(pool.connections).toEqual({ busy: 0, idle: 1 });
  });

  it('skips a 100 Continue read together with the answer', async () => {
    const up = await rawUpstream((s) =>
      s.write('HTTP/1.1 100 Continue\r\nx-a: 1\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ndone'),
    );
    const seen = await send(newPool(up.url)).done;
    expect(seen.events).toEqual(['head 200', 'data done', 'end']);
  });

  it('skips the 100 Continue of a node:http server asked to expect one', async () => {
    const up = await httpUpstream((_req, res) => res.end('after continue'));
    const seen = await send(newPool(up.url), { headers: { expect: '100-continue' }, body: 'payload' }).done;
    expect(seen.events).toEqual(['head 200', 'data after continue', 'end']);
    expect(up.requests[0]?.body).toBe('payload');
  });

  it('pause() stops the data and resume() restarts it', async () => {
    const second = gate();
    const third = gate();
    const up = await httpUpstream((_req, res) => {
      res.writeHead(200);
      res.write('one.');
      void second.wait.then(async () => {
        res.write('two.');
        await third.wait;
        res.end('three');
      });
    });
    const pool = newPool(up.url);
    const first = gate();
    const { call, seen, done } = send(
      pool,
      {},
      {
        onData: (c, piece) => {
          if (piece.toString() === 'one.') {
            c.pause();
            first.open();
          }
        },
      },
    );
    await first.wait;
    second.open();
    // 'two.' reaches the socket but not the handler.
    await sleep(150);
    expect(seen.events).toEqual(['head 200', 'data one.']);
    call.resume();
    await until('the second piece', () => seen.pieces.length === 2);
    expect(bodyOf(seen)).toBe('one.two.');
    third.open();
    await done;
    expect(bodyOf(seen)).toBe('one.two.three');
    expect(seen.events.at(-1)).toBe('end');
    // The connection went back to the pool flowing: the next exchange on it is answered.
    expect(pool.connections.idle).toBe(1);
  });

  it('a call paused at its end leaves its connection flowing for the next exchange', async () => {
    const up = await httpUpstream((req, res) => res.end(`r ${req.url}`));
    const pool = newPool(up.url);
    const first = await send(pool, { path: '/a' }, { onData: (c) => c.pause() }).done;
    expect(bodyOf(first)).toBe('r /a');
    const next = await send(pool, { path: '/b' }).done;
    expect(bodyOf(next)).toBe('r /b');
    expect(up.sockets).toHaveLength(1);
  });

  // The gateway pauses a call when the client is slow and resumes it on the client's 'drain',
  // which can come after the call ended, when its connection carries another exchange.
  it('resume() of an ended call does not restart the data of the next exchange on its connection', async () => {
    const more = gate();
    const up = await httpUpstream((req, res) => {
      if (req.url === '/first') {
        res.end('first');
        return;
      }
      // The head alone first: no body byte comes with it, so none is read before the pause.
      res.writeHead(200);
      res.flushHeaders();
      void more.wait.then(() => {
        res.write('a');
        res.end('b');
      });
    });
    const pool = newPool(up.url);
    const first = send(pool, { path: '/first' }, { onData: (c) => c.pause() });
    await first.done;
    const headSeen = gate();
    const second = send(
      pool,
      { path: '/second' },
      {
        onHead: (c) => {
          c.pause();
          headSeen.open();
        },
      },
    );
    await headSeen.wait;
    // The first call's late 'drain'.
    first.call.resume();
    more.open();
    await sleep(150);
    expect(up.sockets).toHaveLength(1);
    expect(second.seen.events).toEqual(['head 200']);
    second.call.resume();
    await second.done;
  });

  it('pause() of an ended call does not stall the next exchange on its connection', async () => {
    const up = await httpUpstream((req, res) => res.end(`r ${req.url}`));
    const pool = newPool(up.url);
    const first = send(pool, { path: '/a' });
    await first.done;
    first.call.pause();
    const next = send(pool, { path: '/b' });
    try {
      const outcome = await Promise.race([next.done.then(bodyOf), sleep(500).then(() => 'stalled')]);
      expect(outcome).toBe('r /b');
    } finally {
      // A paused socket would not even hear the server's close: drop it.
      next.call.abort();
    }
  });

  it('close() closes idle connections, resolves, and later requests fail', async () => {
    const up = await httpUpstream((_req, res) => res.end('ok'));
    const pool = newPool(up.url);
    await send(pool).done;
    const serverSide = closed(up.sockets[0] as Socket);
    await pool.close();
    await serverSide;
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
    const seen = await send(pool).done;
    expect(seen.events).toEqual(['error false']);
    expect(seen.error?.message).toMatch(/pool is closed/);
    expect(up.sockets).toHaveLength(1);
  });

  it('close() waits for an exchange in flight, then drops its connection', async () => {
    const release = gate();
    const up = await httpUpstream((_req, res) => void release.wait.then(() => res.end('late')));
    const pool = newPool(up.url);
    const { done } = send(pool);
    await until('the request', () => up.requests.length === 1);
    let poolClosed = false;
    const closing = pool.close().then(() => (poolClosed = true));
    await sleep(100);
    expect(poolClosed).toBe(false);
    const serverSide = closed(up.sockets[0] as Socket);
    release.open();
    expect(bodyOf(await done)).toBe('late');
    await closing;
    await serverSide;
    expect(pool.connections).toEqual({ busy: 0, idle: 0 });
  });
});
