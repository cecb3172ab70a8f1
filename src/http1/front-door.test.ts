import {
  Agent,
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import {
  connect,
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net';

import { afterEach, describe, expect, it, vi } from 'vitest';

import { gate, sleep, until } from '../../test/support/timing.js';

import type { FastHandler } from './fast-lane.js';
import { BodyTooLargeError, RequestAbortedError, type FastRequest } from './fast-request.js';
import type { FastResponse } from './fast-response.js';
import { FrontDoor } from './front-door.js';

/** One answer as a client reads it off the wire. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The answer's bytes as they came: head and framed body. */
  wire: string;
}

/**
 * A client on a raw socket: writes exact bytes and reads answers one at a time, with its own
 * small HTTP/1.1 reader (Content-Length, chunked, or to the close).
 */
class RawClient {
  readonly socket: Socket;
  /** The server ended or closed the connection. */
  ended = false;
  readonly closed: Promise<void>;
  #buf = Buffer.alloc(0);
  #wake: (() => void) | undefined;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#wake?.();
    });
    socket.on('error', () => undefined);
    socket.on('end', () => {
      this.ended = true;
      this.#wake?.();
    });
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.ended = true;
        this.#wake?.();
        resolve();
      }),
    );
  }

  static open(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port }, () => {
        s.off('error', reject);
        const c = new RawClient(s);
        clients.push(c);
        resolve(c);
      });
      s.once('error', reject);
    });
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Bytes read and not yet taken as an answer. */
  get pending(): number {
    return this.#buf.length;
  }

  /** The next answer; with `head`, one to HEAD: its head alone, whatever it says of a body. */
  async answer(ms = 3000, o: { head?: boolean } = {}): Promise<Answer> {
    const headEnd = await this.#until(ms, () => {
      const i = this.#buf.indexOf('\r\n\r\n');
      return i < 0 ? undefined : i;
    });
    const lines = this.#buf.toString('latin1', 0, headEnd).split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const start = headEnd + 4;
    let end: number;
    let body: Buffer;
    if (o.head === true || status < 200 || status === 204 || status === 304) {
      end = start;
      body = Buffer.alloc(0);
    } else if (headers['transfer-encoding'] === 'chunked') {
      const parts: Buffer[] = [];
      let at = start;
      for (;;) {
        const lineEnd = await this.#until(ms, () => {
          const i = this.#buf.indexOf('\r\n', at);
          return i < 0 ? undefined : i;
        });
        const size = parseInt(this.#buf.toString('latin1', at, lineEnd).split(';')[0] ?? '', 16);
        if (Number.isNaN(size))
          throw new Error(`bad chunk size in ${JSON.stringify(this.#buf.toString('latin1', start))}`);
        at = lineEnd + 2;
        if (size === 0) {
          at = await this.#until(ms, () => {
            if (this.#buf.length >= at + 2 && this.#buf.toString('latin1', at, at + 2) === '\r\n')
              return at + 2;
            const i = this.#buf.indexOf('\r\n\r\n', at);
            return i < 0 ? undefined : i + 4;
          });
          break;
        }
        const dataEnd = at + size;
        await this.#until(ms, () => (this.#buf.length >= dataEnd + 2 ? true : undefined));
        parts.push(Buffer.from(this.#buf.subarray(at, dataEnd)));
        if (this.#buf.toString('latin1', dataEnd, dataEnd + 2) !== '\r\n')
          throw new Error('no CRLF after chunk data');
        at = dataEnd + 2;
      }
      end = at;
      body = Buffer.concat(parts);
    } else if (headers['content-length'] !== undefined) {
      end = start + Number(headers['content-length']);
      await this.#until(ms, () => (this.#buf.length >= end ? true : undefined));
      body = Buffer.from(this.#buf.subarray(start, end));
    } else {
      await this.#until(ms, () => (this.ended ? true : undefined));
      end = this.#buf.length;
      body = Buffer.from(this.#buf.subarray(start));
    }
    const wire = this.#buf.toString('latin1', 0, end);
    this.#buf = this.#buf.subarray(end);
    return { status, headers, body, wire };
  }

  async #until<T>(ms: number, take: () => T | undefined): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = take();
      if (v !== undefined) return v;
      if (this.ended)
        throw new Error(`the connection closed; unread: ${JSON.stringify(this.#buf.toString('latin1'))}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`no whole answer in ${ms} ms; read: ${JSON.stringify(this.#buf.toString('latin1'))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }
}

const clients: RawClient[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.socket.destroy();
  for (const close of cleanups.splice(0)) await close();
});

interface LaneCall {
  method: string;
  url: string;
  headers: Readonly<Record<string, string | undefined>>;
  body: Buffer;
}

interface NodeCall {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  socket: Socket;
}

interface Setup {
  port: number;
  door: FrontDoor;
  node: HttpServer;
  /** Server sides of the accepted connections. */
  accepted: Socket[];
  laneCalls: LaneCall[];
  nodeCalls: NodeCall[];
  upgrades: string[];
  /** What each hand-off carried along. */
  handOffs: (string | undefined)[];
}

/** The default lane: answers with what it read, as JSON with its length. */
const echo: FastHandler = (req, res) => {
  void req.body(1 << 20).then((body) => {
    const text = JSON.stringify({
      lane: true,
      method: req.method,
      url: req.url,
      body: body.toString('latin1'),
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
};

/** A front door with a lane on /fast/ and node:http behind it, wired as ./http-server.ts does. */
async function start(
  o: {
    handler?: FastHandler;
    maxBodyBytes?: number;
    keepAliveMs?: number;
    headMs?: number;
    requestMs?: number;
    maxConnectionsPerClient?: number;
    lanes?: boolean;
    /** Whether each lane call's body is asked for at once, to record it (default); without, the handler alone asks. */
    record?: boolean;
    onAccept?: (s: Socket) => void;
  } = {},
): Promise<Setup> {
  const laneCalls: LaneCall[] = [];
  const nodeCalls: NodeCall[] = [];
  const upgrades: string[] = [];
  const handOffs: (string | undefined)[] = [];
  const accepted: Socket[] = [];
  const handler = o.handler ?? echo;
  const node = createHttpServer({ keepAliveTimeout: 5000 }, (req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString('latin1');
      nodeCalls.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        socket: req.socket,
      });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ node: true, method: req.method, url: req.url, body }));
    });
  });
  node.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    upgrades.push(req.url ?? '');
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    if (head.length > 0) socket.write(head);
    socket.on('data', (d: Buffer) => socket.write(d));
  });
  const door = new FrontDoor({
    lanes:
      o.lanes === false
        ? []
        : [
            {
              prefix: '/fast/',
              maxBodyBytes: o.maxBodyBytes ?? 1024,
              handler: (req, res) => {
                laneCalls.push({
                  method: req.method,
                  url: req.url,
                  headers: req.headers,
                  body: Buffer.alloc(0),
                });
                const call = laneCalls[laneCalls.length - 1] as LaneCall;
                if (o.record !== false)
                  req.body(1 << 20).then(
                    (b) => (call.body = b),
                    () => undefined,
                  );
                handler(req, res);
              },
            },
          ],
    keepAliveMs: o.keepAliveMs,
    headMs: o.headMs,
    requestMs: o.requestMs,
    maxConnectionsPerClient: o.maxConnectionsPerClient,
    handOff: (socket, read) => {
      handOffs.push(read?.toString('latin1'));
      node.emit('connection', socket);
      if (read !== undefined) socket.emit('data', read);
    },
  });
  const listener: NetServer = createNetServer({ allowHalfOpen: true }, (s) => {
    accepted.push(s);
    o.onAccept?.(s);
    door.accept(s);
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', () => resolve()));
  node.emit('listening');
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        door.closeAll();
        node.closeAllConnections();
        for (const s of accepted) s.destroy();
        node.close(() => undefined);
        listener.close(() => resolve());
      }),
  );
  return {
    port: (listener.address() as AddressInfo).port,
    door,
    node,
    accepted,
    laneCalls,
    nodeCalls,
    upgrades,
    handOffs,
  };
}

/** A node:http client request; the agent is destroyed after the test. */
function get(
  port: number,
  path: string,
  o: { method?: string; body?: string; agent?: Agent; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path, method: o.method ?? 'GET', agent: o.agent, headers: o.headers },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(parts).toString(),
            socket: res.socket,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

function keepAliveAgent(): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.push(() => agent.destroy());
  return agent;
}

const post = (path: string, body: string | Buffer, extra = ''): Buffer =>
  Buffer.concat([
    Buffer.from(
      `POST ${path} HTTP/1.1\r\nHost: t\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
      'latin1',
    ),
    Buffer.from(body),
  ]);

const json = (a: Answer): Record<string, unknown> => JSON.parse(a.body.toString()) as Record<string, unknown>;

describe('FrontDoor', () => {
  it('answers a POST on its lane: body bytes and lower-cased headers in, one write out', async () => {
    let res: FastResponse | undefined;
    const writes: { mock: { calls: unknown[][] } }[] = [];
    const t = await start({
      onAccept: (s) => writes.push(vi.spyOn(s, 'write')),
      handler: (req, r) => {
        res = r;
        void req.body(1024).then((body) => {
          const text = `got ${body.length} bytes`;
          r.writeHead(201, {
            'Content-Type': 'text/plain',
            'Content-Length': text.length,
            'X-Multi': ['a', 'b'],
            Connection: 'keep-alive',
            'X-Skip': undefined,
          });
          r.end(text);
        });
      },
    });
    const body = Buffer.from([0x00, 0x01, 0x0d, 0x0a, 0x0d, 0x0a, 0xff, 0x80, 0x7f, 0x41]);
    const c = await RawClient.open(t.port);
    c.write(
      post('/fast/echo?x=1', body, 'X-Custom-Header: Value\r\nContent-Type: application/octet-stream\r\n'),
    );
    const a = await c.answer();
    expect(t.laneCalls).toHaveLength(1);
    const call = t.laneCalls[0] as LaneCall;
    expect(call.method).toBe('POST');
    expect(call.url).toBe('/fast/echo?x=1');
    expect(call.body.equals(body)).toBe(true);
    expect(call.headers).toEqual({
      host: 't',
      'x-custom-header': 'Value',
      'content-type': 'application/octet-stream',
      'content-length': '10',
    });
    expect(a.status).toBe(201);
    expect(a.wire.startsWith('HTTP/1.1 201 Created\r\n')).toBe(true);
    expect(a.headers['content-type']).toBe('text/plain');
    expect(a.headers['content-length']).toBe('12');
    expect(a.headers['x-multi']).toBe('a, b');
    expect(a.headers['transfer-encoding']).toBeUndefined();
    expect(a.headers['connection']).toBeUndefined();
    expect(a.headers['date']).toMatch(/GMT$/);
    expect(a.body.toString()).toBe('got 10 bytes');
    expect(a.wire).toContain('\r\nX-Multi: a\r\nX-Multi: b\r\n');
    expect(res?.headersSent).toBe(true);
    expect(res?.writableFinished).toBe(true);
    expect(c.pending).toBe(0);
    // Head and body went out in a single write on the socket.
    expect(writes).toHaveLength(1);
    expect(writes[0]?.mock.calls).toHaveLength(1);
    expect(t.nodeCalls).toHaveLength(0);
    expect(t.door.size).toBe(1);
  });

  it('sends an answer without a Content-Length chunked, read whole by node:http and by fetch', async () => {
    const t = await start({
      handler: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('part one, ');
        setTimeout(() => {
          res.write('');
          res.end('part two');
        }, 20);
      },
    });
    const viaNode = await get(t.port, '/fast/stream');
    expect(viaNode.status).toBe(200);
    expect(viaNode.headers['transfer-encoding']).toBe('chunked');
    expect(viaNode.body).toBe('part one, part two');
    const viaFetch = await fetch(`http://127.0.0.1:${t.port}/fast/stream`);
    expect(viaFetch.headers.get('transfer-encoding')).toBe('chunked');
    expect(await viaFetch.text()).toBe('part one, part two');
    const c = await RawClient.open(t.port);
    c.write('GET /fast/stream HTTP/1.1\r\nHost: t\r\n\r\n');
    const a = await c.answer();
    expect(a.wire.slice(a.wire.indexOf('\r\n\r\n') + 4)).toBe(
      'a\r\npart one, \r\n8\r\npart two\r\n0\r\n\r\n',
    );
    expect(t.nodeCalls).toHaveLength(0);
  });

  it('frames write() without writeHead as a chunked 200, end() alone as an empty answer, end(text) by its UTF-8 length', async () => {
    const t = await start({
      handler: (req, res) => {
        if (req.url === '/fast/write') {
          res.write(Buffer.from('xyz'));
          res.end();
        } else if (req.url === '/fast/text') {
          res.end('h\u00e9llo');
        } else {
          res.end();
        }
      },
    });
    const c = await RawClient.open(t.port);
    c.write(
      'GET /fast/write HTTP/1.1\r\nHost: t\r\n\r\nGET /fast/empty HTTP/1.1\r\nHost: t\r\n\r\nGET /fast/text HTTP/1.1\r\nHost: t\r\n\r\n',
    );
    const written = await c.answer();
    expect(written.status).toBe(200);
    expect(written.headers['transfer-encoding']).toBe('chunked');
    expect(written.body.toString()).toBe('xyz');
    const empty = await c.answer();
    expect(empty.status).toBe(200);
    expect(empty.headers['content-length']).toBe('0');
    expect(empty.body.length).toBe(0);
    const text = await c.answer();
    expect(text.headers['content-length']).toBe('6');
    expect(text.body.toString()).toBe('h\u00e9llo');
  });

  it('sends a 204 without a body or framing, and keeps the connection', async () => {
    const t = await start({
      handler: (req, res) => {
        if (req.url === '/fast/none') {
          res.writeHead(204, { 'x-a': '1' });
          res.write('dropped');
          res.end();
        } else {
          res.end('next');
        }
      },
    });
    const c = await RawClient.open(t.port);
    c.write('DELETE /fast/none HTTP/1.1\r\nHost: t\r\n\r\n');
    const a = await c.answer();
    expect(a.status).toBe(204);
    expect(a.headers['transfer-encoding']).toBeUndefined();
    expect(a.headers['content-length']).toBeUndefined();
    c.write('GET /fast/next HTTP/1.1\r\nHost: t\r\n\r\n');
    const b = await c.answer();
    expect(b.body.toString()).toBe('next');
    // Nothing of 'dropped' came between the two answers.
    expect(b.wire.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
  });

  it('refuses a second writeHead', async () => {
    let error: unknown;
    const t = await start({
      handler: (_req, res) => {
        res.writeHead(200, { 'content-length': 2 });
        try {
          res.writeHead(500);
        } catch (e) {
          error = e;
        }
        res.end('ok');
      },
    });
    const c = await RawClient.open(t.port);
    c.write('GET /fast/x HTTP/1.1\r\nHost: t\r\n\r\n');
    expect((await c.answer()).status).toBe(200);
    expect((error as Error).message).toMatch(/already written/);
  });

  it('answers several keep-alive requests on one connection', async () => {
    const t = await start();
    const agent = keepAliveAgent();
    for (let i = 0; i < 5; i++) {
      const r = await get(t.port, `/fast/${i}`, { method: 'POST', body: `body ${i}`, agent });
      expect(JSON.parse(r.body)).toEqual({
        lane: true,
        method: 'POST',
        url: `/fast/${i}`,
        body: `body ${i}`,
      });
    }
    expect(t.accepted).toHaveLength(1);
    expect(t.laneCalls.map((c) => c.url)).toEqual(['/fast/0', '/fast/1', '/fast/2', '/fast/3', '/fast/4']);
    expect(t.nodeCalls).toHaveLength(0);
  });

  it('reads a request that arrives in pieces', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    const bytes = post('/fast/pieces', 'hello pieces');
    for (let i = 0; i < bytes.length; i += 7) {
      c.write(bytes.subarray(i, i + 7));
      await sleep(2);
    }
    const a = await c.answer();
    expect(json(a)).toMatchObject({ lane: true, url: '/fast/pieces', body: 'hello pieces' });
    expect(t.laneCalls).toHaveLength(1);
  });

  it('answers pipelined requests written in one TCP write in order, one at a time', async () => {
    const log: string[] = [];
    const t = await start({
      handler: (req, res) => {
        log.push(`call ${req.url}`);
        // The first answer is the slowest: the others must still wait for it.
        setTimeout(
          () => {
            log.push(`answer ${req.url}`);
            res.end(`answer to ${req.url}`);
          },
          req.url === '/fast/1' ? 60 : 0,
        );
      },
    });
    const c = await RawClient.open(t.port);
    c.write(
      Buffer.concat([
        post('/fast/1', 'a'),
        post('/fast/2', 'bb'),
        Buffer.from('GET /fast/3 HTTP/1.1\r\nHost: t\r\n\r\n'),
      ]),
    );
    const answers = [await c.answer(), await c.answer(), await c.answer()];
    expect(answers.map((a) => a.body.toString())).toEqual([
      'answer to /fast/1',
      'answer to /fast/2',
      'answer to /fast/3',
    ]);
    expect(log).toEqual([
      'call /fast/1',
      'answer /fast/1',
      'call /fast/2',
      'answer /fast/2',
      'call /fast/3',
      'answer /fast/3',
    ]);
    expect(t.laneCalls.map((l) => l.body.toString())).toEqual(['a', 'bb', '']);
    expect(t.accepted).toHaveLength(1);
  });

  it('answers pipelined requests whose handlers answer at once', async () => {
    const t = await start({ handler: (req, res) => res.end(req.url) });
    const c = await RawClient.open(t.port);
    const requests = Array.from({ length: 50 }, (_, i) => `GET /fast/${i} HTTP/1.1\r\nHost: t\r\n\r\n`).join(
      '',
    );
    c.write(requests);
    for (let i = 0; i < 50; i++) expect((await c.answer()).body.toString()).toBe(`/fast/${i}`);
  });

  it('hands a request to another path to node:http', async () => {
    const t = await start();
    const r = await get(t.port, '/other/path?q=1', { method: 'POST', body: 'to node' });
    expect(JSON.parse(r.body)).toEqual({
      node: true,
      method: 'POST',
      url: '/other/path?q=1',
      body: 'to node',
    });
    expect(t.laneCalls).toHaveLength(0);
    expect(t.nodeCalls).toHaveLength(1);
    expect(t.handOffs).toHaveLength(1);
    expect(t.handOffs[0]).toContain('POST /other/path?q=1 HTTP/1.1\r\n');
    expect(t.door.size).toBe(0);
  });

  it('hands a kept connection to node:http when its second request is not for the lane, and leaves it there', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(post('/fast/first', 'one'));
    expect(json(await c.answer())).toMatchObject({ lane: true, url: '/fast/first', body: 'one' });
    c.write(post('/other', 'two'));
    expect(json(await c.answer())).toMatchObject({ node: true, url: '/other', body: 'two' });
    // Once handed off, the connection is node:http's, lane path or not.
    c.write(post('/fast/third', 'three'));
    expect(json(await c.answer())).toMatchObject({ node: true, url: '/fast/third', body: 'three' });
    expect(t.accepted).toHaveLength(1);
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/first']);
    expect(t.nodeCalls.map((n) => n.url)).toEqual(['/other', '/fast/third']);
    expect(t.nodeCalls[0]?.socket).toBe(t.accepted[0]);
    expect(t.handOffs[0]).toBe(post('/other', 'two').toString('latin1'));
  });

  it('answers a lane request and then hands the next one, pipelined in the same write, to node:http', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(Buffer.concat([post('/fast/a', 'x'), Buffer.from('GET /node HTTP/1.1\r\nHost: t\r\n\r\n')]));
    expect(json(await c.answer())).toMatchObject({ lane: true, url: '/fast/a' });
    expect(json(await c.answer())).toMatchObject({ node: true, url: '/node' });
  });

  it('hands a chunked request body to node:http', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(
      'POST /fast/chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n',
    );
    expect(json(await c.answer())).toEqual({
      node: true,
      method: 'POST',
      url: '/fast/chunked',
      body: 'hello world',
    });
    expect(t.laneCalls).toHaveLength(0);
  });

  it('hands an Expect: 100-continue request to node:http, which asks for the body', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write('POST /fast/expect HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n');
    const interim = await c.answer();
    expect(interim.status).toBe(100);
    c.write('body');
    expect(json(await c.answer())).toEqual({ node: true, method: 'POST', url: '/fast/expect', body: 'body' });
    expect(t.laneCalls).toHaveLength(0);
  });

  it('hands an Upgrade request to node:http', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write('GET /fast/ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly');
    const a = await c.answer();
    expect(a.status).toBe(101);
    expect(t.upgrades).toEqual(['/fast/ws']);
    await until('the echo', () => c.pending >= 5);
    c.write('ping');
    await until('the echo', () => c.pending >= 9);
    expect(t.laneCalls).toHaveLength(0);
    expect(t.nodeCalls).toHaveLength(0);
  });

  it('hands a body larger than the lane takes to node:http', async () => {
    const t = await start({ maxBodyBytes: 16 });
    const c = await RawClient.open(t.port);
    c.write(post('/fast/small', '0123456789abcdef'));
    expect(json(await c.answer())).toMatchObject({ lane: true, body: '0123456789abcdef' });
    const big = 'x'.repeat(17);
    c.write(post('/fast/big', big));
    expect(json(await c.answer())).toEqual({ node: true, method: 'POST', url: '/fast/big', body: big });
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/small']);
  });

  it('hands a head it does not read (HTTP/1.0) to node:http', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write('GET /fast/old HTTP/1.0\r\nHost: t\r\n\r\n');
    expect(json(await c.answer())).toMatchObject({ node: true, url: '/fast/old' });
    expect(t.laneCalls).toHaveLength(0);
  });

  it('hands every connection to node:http at once when it has no lanes', async () => {
    const t = await start({ lanes: false });
    const r = await get(t.port, '/fast/x');
    expect(JSON.parse(r.body)).toMatchObject({ node: true, url: '/fast/x' });
    expect(t.handOffs).toEqual([undefined]);
  });

  it('closes the connection after the answer when the client sent Connection: close', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(post('/fast/bye', 'x', 'Connection: close\r\n'));
    const a = await c.answer();
    expect(json(a)).toMatchObject({ lane: true, url: '/fast/bye' });
    expect(a.headers['connection']).toBe('close');
    await c.closed;
    expect(c.pending).toBe(0);
    expect(t.door.size).toBe(0);
  });

  // RFC 9112, 9.6: after a request with `close`, no further request is processed.
  it('takes no request pipelined after one that asked Connection: close', async () => {
    const t = await start({ handler: (req, res) => res.end(req.url) });
    const c = await RawClient.open(t.port);
    c.write(
      'GET /fast/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /fast/2 HTTP/1.1\r\nHost: t\r\n\r\n',
    );
    const a = await c.answer();
    expect(a.headers['connection']).toBe('close');
    await c.closed;
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/1']);
  });

  it('takes no request sent after the answer to one that asked Connection: close', async () => {
    const release = gate();
    const t = await start({ handler: (req, res) => void release.wait.then(() => res.end(req.url)) });
    const c = await RawClient.open(t.port);
    c.write('GET /fast/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    await until('the first request', () => t.laneCalls.length === 1);
    // A pipelining client sends on before it hears the answer.
    c.write('GET /fast/2 HTTP/1.1\r\nHost: t\r\n\r\n');
    await sleep(20);
    release.open();
    expect((await c.answer()).headers['connection']).toBe('close');
    c.write('GET /fast/3 HTTP/1.1\r\nHost: t\r\n\r\n');
    await sleep(50);
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/1']);
  });

  it('treats a client that half-closed as gone, as node:http does: its request is cancelled', async () => {
    const gone = gate();
    const t = await start({
      handler: (_req, res) => {
        res.once('close', () => gone.open());
      },
    });
    const c = await RawClient.open(t.port);
    c.socket.end(Buffer.concat([post('/fast/1', 'a'), post('/fast/2', 'b')]));
    await gone.wait;
    await c.closed;
    expect(c.pending).toBe(0);
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/1']);
  });

  it('closes a kept connection when the client half-closes it between requests', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(post('/fast/1', 'a'));
    await c.answer();
    c.socket.end();
    await c.closed;
    await until('the door to let go', () => t.door.size === 0);
  });

  it('gives node:http a request pipelined after a lane one, once the lane one is answered', async () => {
    const t = await start({ handler: (req, res) => void sleep(20).then(() => res.end(req.url)) });
    const c = await RawClient.open(t.port);
    c.write(Buffer.concat([Buffer.from('GET /fast/1 HTTP/1.1\r\nHost: t\r\n\r\n'), post('/other', 'x')]));
    expect((await c.answer()).body.toString()).toBe('/fast/1');
    await until('node:http to take the request', () => t.nodeCalls.length === 1);
    const second = await c.answer();
    expect(json(second)).toEqual({ node: true, method: 'POST', url: '/other', body: 'x' });
  });

  it('stops reading a client that sends more than 64 KiB ahead, and answers all once resumed', async () => {
    const release = gate();
    const t = await start({
      maxBodyBytes: 100 * 1024,
      handler: (req, res) => {
        const answer = () => void req.body(1 << 20).then((b) => res.end(`${req.url} ${b.length}`));
        if (req.url === '/fast/slow') void release.wait.then(answer);
        else answer();
      },
    });
    const c = await RawClient.open(t.port);
    const big = 'z'.repeat(40 * 1024);
    c.write(
      Buffer.concat([
        post('/fast/slow', 's'),
        post('/fast/a', big),
        post('/fast/b', big),
        post('/fast/c', big),
      ]),
    );
    const server = () => t.accepted[0] as Socket;
    await until('the door to stop reading', () => t.accepted.length === 1 && server().isPaused());
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/slow']);
    release.open();
    const bodies = [];
    for (let i = 0; i < 4; i++) bodies.push((await c.answer()).body.toString());
    expect(bodies).toEqual([
      '/fast/slow 1',
      `/fast/a ${big.length}`,
      `/fast/b ${big.length}`,
      `/fast/c ${big.length}`,
    ]);
    expect(server().isPaused()).toBe(false);
  });

  it.each(['reset', 'closed (FIN)'] as const)(
    'tells the handler at once, through res.once("close"), of a client %s before the answer',
    async (how) => {
      let res: FastResponse | undefined;
      const gone = gate();
      const t = await start({
        handler: (_req, r) => {
          res = r;
          r.once('close', () => gone.open());
        },
      });
      const c = await RawClient.open(t.port);
      c.write('GET /fast/slow HTTP/1.1\r\nHost: t\r\n\r\n');
      await until('the handler', () => res !== undefined);
      expect(res?.writableFinished).toBe(false);
      if (how === 'reset') c.socket.resetAndDestroy();
      else c.socket.destroy();
      await gone.wait;
      expect(res?.writableFinished).toBe(false);
      expect(res?.headersSent).toBe(false);
      // Writing to a gone client takes nothing.
      expect(res?.write('late')).toBe(false);
      await until('the door to let go', () => t.door.size === 0);
    },
  );

  it('does not call close listeners of an answer that finished', async () => {
    const listener = vi.fn();
    const t = await start({
      handler: (_req, res) => {
        res.once('close', listener);
        res.end('done');
      },
    });
    const c = await RawClient.open(t.port);
    c.write('GET /fast/x HTTP/1.1\r\nHost: t\r\n\r\n');
    expect((await c.answer()).body.toString()).toBe('done');
    c.socket.destroy();
    await until('the door to let go', () => t.door.size === 0);
    expect(listener).not.toHaveBeenCalled();
  });

  it('closeIdle() closes idle connections and closes busy ones after their answer', async () => {
    const release = gate();
    const t = await start({
      handler: (req, res) => {
        if (req.url === '/fast/slow') void release.wait.then(() => res.end('slow answer'));
        else res.end('quick');
      },
    });
    const idle = await RawClient.open(t.port);
    idle.write('GET /fast/quick HTTP/1.1\r\nHost: t\r\n\r\n');
    expect((await idle.answer()).body.toString()).toBe('quick');
    const busy = await RawClient.open(t.port);
    busy.write('GET /fast/slow HTTP/1.1\r\nHost: t\r\n\r\n');
    await until('the slow request', () => t.laneCalls.length === 2);
    expect(t.door.size).toBe(2);
    t.door.closeIdle();
    expect(t.door.closing).toBe(true);
    await idle.closed;
    await sleep(30);
    expect(busy.ended).toBe(false);
    release.open();
    const a = await busy.answer();
    expect(a.body.toString()).toBe('slow answer');
    await busy.closed;
    expect(t.door.size).toBe(0);
  });

  // Whether an answer closes its connection is decided when its head is written, not when its request came.
  it('closeIdle() makes the answer of a request begun before it carry connection: close', async () => {
    const release = gate();
    const t = await start({ handler: (_req, res) => void release.wait.then(() => res.end('slow answer')) });
    const busy = await RawClient.open(t.port);
    busy.write('GET /fast/slow HTTP/1.1\r\nHost: t\r\n\r\n');
    await until('the slow request', () => t.laneCalls.length === 1);
    t.door.closeIdle();
    release.open();
    const a = await busy.answer();
    expect(a.body.toString()).toBe('slow answer');
    expect(a.headers['connection']).toBe('close');
  });

  it('answers a request read after closeIdle() with connection: close', async () => {
    const t = await start({ handler: (_req, res) => res.end('ok') });
    const c = await RawClient.open(t.port);
    // Half a request: not idle, so closeIdle() leaves it.
    c.write('GET /fast/late HTTP/1.1\r\n');
    await sleep(20);
    t.door.closeIdle();
    c.write('Host: t\r\n\r\n');
    const a = await c.answer();
    expect(a.headers['connection']).toBe('close');
    await c.closed;
  });

  it('closes a connection idle longer than keepAliveMs', async () => {
    const t = await start({ keepAliveMs: 50 });
    const c = await RawClient.open(t.port);
    c.write(post('/fast/x', ''));
    await c.answer();
    expect(t.door.size).toBe(1);
    await Promise.race([c.closed, sleep(2500).then(() => Promise.reject(new Error('still open')))]);
    await until('the door to let go', () => t.door.size === 0);
  });

  it('answers 408 and closes when a request body has not come whole within requestMs; body() rejects with RequestAbortedError', async () => {
    const errors: unknown[] = [];
    const t = await start({
      requestMs: 50,
      record: false,
      handler: (req, res) =>
        void req.body(1024).then(
          () => res.end('not this'),
          (e: unknown) => {
            errors.push(e);
            res.end('nor this');
          },
        ),
    });
    const c = await RawClient.open(t.port);
    c.write('POST /fast/x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nonly5');
    const a = await c.answer(5000);
    expect(a.status).toBe(408);
    expect(a.wire.startsWith('HTTP/1.1 408 Request Timeout\r\n')).toBe(true);
    expect(a.headers['connection']).toBe('close');
    expect(json(a)).toEqual({
      error: {
        message:
          'the request did not come whole in time (its head is awaited 10 s, all of it 0.05 s): send each request without pausing',
        type: 'invalid_request_error',
        param: null,
        code: 'request_timeout',
      },
    });
    await c.closed;
    await until('the handler to hear of it', () => errors.length === 1);
    expect(errors[0]).toBeInstanceOf(RequestAbortedError);
    expect((errors[0] as Error).message).toBe('the request body did not come whole within 0.05 s');
    expect(c.pending).toBe(0);
    expect(t.door.size).toBe(0);
    expect(t.nodeCalls).toHaveLength(0);
  });

  it('hands a head longer than 16 KiB to node:http, which refuses it', async () => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(`GET /fast/huge HTTP/1.1\r\nHost: t\r\nX-Big: ${'b'.repeat(17 * 1024)}\r\n`);
    const a = await c.answer();
    expect(a.status).toBe(431);
    expect(t.handOffs).toHaveLength(1);
    expect(t.laneCalls).toHaveLength(0);
  });

  it('body(limit) rejects with BodyTooLargeError past the limit, and resolves at it', async () => {
    const errors: unknown[] = [];
    const t = await start({
      handler: (req: FastRequest, res) => {
        req.body(4).then(
          (b) => res.end(`ok ${b.toString()}`),
          (e: unknown) => {
            errors.push(e);
            res.writeHead(413, { 'content-length': 0 });
            res.end();
          },
        );
      },
    });
    const c = await RawClient.open(t.port);
    c.write(post('/fast/big', '12345'));
    const a = await c.answer();
    expect(a.status).toBe(413);
    expect(a.wire.startsWith('HTTP/1.1 413 Payload Too Large\r\n')).toBe(true);
    expect(errors).toHaveLength(1);
    const e = errors[0] as BodyTooLargeError;
    expect(e).toBeInstanceOf(BodyTooLargeError);
    expect(e.name).toBe('BodyTooLargeError');
    expect(e.limit).toBe(4);
    expect(e.message).toBe('the request body is over 4 bytes');
    c.write(post('/fast/fits', '1234'));
    expect((await c.answer()).body.toString()).toBe('ok 1234');
  });

  it('hands a request to its lane at its head: one refused without reading its body keeps none of it, says connection: close and closes', async () => {
    const release = gate();
    const t = await start({
      maxBodyBytes: 64 << 20,
      record: false,
      // As the gateway does: the key is checked from the head, and the body never asked for.
      handler: (_req, res) =>
        void release.wait.then(() => {
          res.writeHead(401, { 'content-type': 'application/json', 'content-length': 2 });
          res.end('{}');
        }),
    });
    const c = await RawClient.open(t.port);
    const size = 16 << 20;
    c.write(`POST /fast/upload HTTP/1.1\r\nHost: t\r\nContent-Length: ${size}\r\n\r\n`);
    c.write(Buffer.alloc(size, 0x61));
    await until('the lane', () => t.laneCalls.length === 1);
    const server = t.accepted[0] as Socket;
    await until('the door to stop reading', () => server.isPaused());
    // What was read is bounded for each connection, not by the body.
    expect(server.bytesRead).toBeLessThan(256 * 1024);
    release.open();
    const a = await c.answer();
    expect(a.status).toBe(401);
    expect(a.headers['connection']).toBe('close');
    // The rest of the body is read and dropped, and the connection closes.
    await c.closed;
    expect(t.door.size).toBe(0);
    expect(t.nodeCalls).toHaveLength(0);
  });

  it('reads a body that comes after its head once the handler asks for it, and keeps the connection', async () => {
    const t = await start({
      record: false,
      handler: (req, res) =>
        void sleep(5).then(() => req.body(1024).then((b) => res.end(`${req.url} ${b.toString()}`))),
    });
    const c = await RawClient.open(t.port);
    c.write('POST /fast/later HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n');
    await until('the lane', () => t.laneCalls.length === 1);
    for (const piece of ['hello', ' ', 'world']) {
      await sleep(10);
      c.write(piece);
    }
    const a = await c.answer();
    expect(a.body.toString()).toBe('/fast/later hello world');
    expect(a.headers['connection']).toBeUndefined();
    c.write(post('/fast/next', 'again'));
    expect((await c.answer()).body.toString()).toBe('/fast/next again');
    expect(t.accepted).toHaveLength(1);
  });

  it('rejects body() with RequestAbortedError when the client goes away before the body came, and lets go', async () => {
    const errors: unknown[] = [];
    const t = await start({
      record: false,
      handler: (req) => void req.body(1024).catch((e: unknown) => errors.push(e)),
    });
    const c = await RawClient.open(t.port);
    c.write('POST /fast/x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhalf');
    await until('the lane', () => t.laneCalls.length === 1);
    c.socket.destroy();
    await until('the handler to hear of it', () => errors.length === 1);
    expect(errors[0]).toBeInstanceOf(RequestAbortedError);
    await until('the door to let go', () => t.door.size === 0);
  });

  it('answers HEAD with its head alone, whatever the handler writes, and reads the next request after it', async () => {
    const t = await start({
      handler: (req, res) => {
        if (req.url === '/fast/sized') {
          res.writeHead(404, { 'content-type': 'application/json', 'content-length': 13 });
          res.end('{"error":"x"}');
        } else {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('streamed');
          res.end();
        }
      },
    });
    const c = await RawClient.open(t.port);
    c.write(
      'HEAD /fast/sized HTTP/1.1\r\nHost: t\r\n\r\nHEAD /fast/streamed HTTP/1.1\r\nHost: t\r\n\r\nGET /fast/sized HTTP/1.1\r\nHost: t\r\n\r\n',
    );
    const sized = await c.answer(3000, { head: true });
    expect(sized.status).toBe(404);
    // As node:http answers HEAD: the length the body would have, and no body.
    expect(sized.headers['content-length']).toBe('13');
    const streamed = await c.answer(3000, { head: true });
    expect(streamed.status).toBe(200);
    expect(streamed.headers['transfer-encoding']).toBeUndefined();
    const get = await c.answer();
    expect(get.wire.startsWith('HTTP/1.1 404 Not Found\r\n')).toBe(true);
    expect(get.body.toString()).toBe('{"error":"x"}');
    expect(c.pending).toBe(0);
  });

  it('closes the connection after an answer whose handler asked for it with Connection: close', async () => {
    const t = await start({
      handler: (_req, res) => res.writeHead(413, { 'content-length': 0, Connection: 'close' }).end(),
    });
    const c = await RawClient.open(t.port);
    c.write(post('/fast/x', 'ab'));
    const a = await c.answer();
    expect(a.headers['connection']).toBe('close');
    await c.closed;
    expect(t.door.size).toBe(0);
  });

  it('writes the reason phrase of every status node:http knows', async () => {
    const t = await start({
      handler: (req, res) => res.writeHead(Number(req.url.slice(6)), { 'content-length': 0 }).end(),
    });
    const c = await RawClient.open(t.port);
    c.write('GET /fast/431 HTTP/1.1\r\nHost: t\r\n\r\nGET /fast/599 HTTP/1.1\r\nHost: t\r\n\r\n');
    expect((await c.answer()).wire.startsWith('HTTP/1.1 431 Request Header Fields Too Large\r\n')).toBe(true);
    expect((await c.answer()).wire.startsWith('HTTP/1.1 599 Unknown\r\n')).toBe(true);
  });

  it.each([
    ['a partial head', 'GET /fast/x HTTP/1.1\r\nHost: t\r\n'],
    ['a request line not yet ended', 'POST /fast/x'],
  ])('answers 408 to %s not come whole within headMs, and closes', async (_name, bytes) => {
    const t = await start({ headMs: 50 });
    const c = await RawClient.open(t.port);
    c.write(bytes);
    const a = await c.answer(5000);
    expect(a.status).toBe(408);
    expect(a.headers['connection']).toBe('close');
    expect((json(a)['error'] as { code: string }).code).toBe('request_timeout');
    await c.closed;
    expect(t.laneCalls).toHaveLength(0);
    expect(t.handOffs).toHaveLength(0);
  });

  it.each([
    ['TLS bytes (a ClientHello)', Buffer.from('16030100f5010000f10303', 'hex')],
    ['a request line ended by a bare LF', Buffer.from('GET /fast/x HTTP/1.1\nHost: t\n')],
    ['a NUL in a header not yet ended', Buffer.from('GET /fast/x HTTP/1.1\r\nHost: t\r\nX-A: a\u0000')],
  ])('hands %s to node:http at once, which refuses it', async (_name, bytes) => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(bytes);
    expect((await c.answer()).status).toBe(400);
    expect(t.handOffs).toEqual([bytes.toString('latin1')]);
    expect(t.laneCalls).toHaveLength(0);
  });

  // What the fast path takes is a part of what node:http takes: anything else is node:http's to answer.
  it.each([
    ['a method node:http does not know', 'FOO /fast/x HTTP/1.1\r\nHost: t\r\n\r\n', 400],
    [
      'a method node:http knows and the lane does not take',
      'PROPFIND /fast/x HTTP/1.1\r\nHost: t\r\n\r\n',
      200,
    ],
    ['a request without Host', 'GET /fast/x HTTP/1.1\r\n\r\n', 400],
    [
      'the same Content-Length twice',
      'POST /fast/x HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na',
      400,
    ],
    ['a byte past ASCII in the target', 'GET /fast/caf\u00e9 HTTP/1.1\r\nHost: t\r\n\r\n', 400],
    [
      'a head over 16 KiB in one write',
      `GET /fast/x HTTP/1.1\r\nHost: t\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`,
      431,
    ],
  ])('hands %s to node:http', async (_name, text, status) => {
    const t = await start();
    const c = await RawClient.open(t.port);
    c.write(Buffer.from(text, 'latin1'));
    expect((await c.answer()).status).toBe(status);
    expect(t.handOffs).toHaveLength(1);
    expect(t.laneCalls).toHaveLength(0);
  });

  it('takes a whole head of 16 KiB, the most node:http also takes', async () => {
    const t = await start({ handler: (req, res) => res.end(String(req.headers['x-big']?.length)) });
    const c = await RawClient.open(t.port);
    const bare = 'GET /fast/x HTTP/1.1\r\nHost: t\r\nX-Big: \r\n\r\n';
    c.write(`GET /fast/x HTTP/1.1\r\nHost: t\r\nX-Big: ${'b'.repeat(16 * 1024 - bare.length)}\r\n\r\n`);
    expect((await c.answer()).body.toString()).toBe(String(16 * 1024 - bare.length));
    expect(t.handOffs).toHaveLength(0);
  });

  it('answers 503 to a connection past maxConnectionsPerClient from one address, counting handed-off ones, until one closes', async () => {
    const t = await start({ maxConnectionsPerClient: 2 });
    const lane = await RawClient.open(t.port);
    lane.write(post('/fast/1', 'x'));
    expect(json(await lane.answer())).toMatchObject({ lane: true });
    const handedOff = await RawClient.open(t.port);
    handedOff.write('GET /other HTTP/1.1\r\nHost: t\r\n\r\n');
    expect(json(await handedOff.answer())).toMatchObject({ node: true });
    const third = await RawClient.open(t.port);
    third.write(post('/fast/2', 'y'));
    const refused = await third.answer();
    expect(refused.status).toBe(503);
    expect(refused.headers['connection']).toBe('close');
    expect(refused.headers['retry-after']).toBe('1');
    expect(json(refused)).toEqual({
      error: {
        message:
          '127.0.0.1 has 2 connections open here, the most one address may (gateway.max_connections_per_client): reuse connections (keep-alive) or close some before opening more',
        type: 'service_unavailable',
        param: null,
        code: 'too_many_connections',
      },
    });
    await third.closed;
    expect(t.laneCalls.map((l) => l.url)).toEqual(['/fast/1']);
    handedOff.socket.destroy();
    await until('the server to see it close', () => t.accepted[1]?.destroyed === true);
    const again = await RawClient.open(t.port);
    again.write(post('/fast/3', 'z'));
    expect(json(await again.answer())).toMatchObject({ lane: true, url: '/fast/3' });
  });
});
