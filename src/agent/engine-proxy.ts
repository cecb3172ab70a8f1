import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

import type { Logger } from 'pino';

import { messageOf } from '../core/errors.js';
import type { AssignedShard } from '../protocol/agent-protocol.js';
import { engineProxyPrefix } from '../protocol/engine-proxy-path.js';
import { hopByHop } from '../http1/hop-by-hop.js';

/** A certificate, its key and the CA that issued it, in PEM: what the control plane gives a node's forwarder. */
export interface TlsMaterial {
  cert: string;
  key: string;
  ca: string;
}

/** Where one replica's engine listens on this node, and the key every request to it must carry. */
export interface EngineRoute {
  port: number;
  apiKey: string;
}

export interface EngineProxyOptions {
  /** Where it listens: the node's address; unset, every address. */
  host?: string | undefined;
  /** 0: one the OS gives. */
  port: number;
  logger: Logger;
}

export { engineProxyPrefix };

/** The first byte of a TLS handshake record (RFC 8446, 5.1: ContentType handshake). */
const tlsHandshake = 0x16;

/**
 * The node's door to its engines for gateways on other machines: TLS on one port of the
 * node's address, each request forwarded to its replica's engine on 127.0.0.1, so engines
 * listen on loopback only and prompts, answers and engine keys cross the network
 * encrypted. A request names its replica in the path (`/r/<replica>/...`, taken off
 * before it goes on) and must carry that replica's engine key, which the engine checks
 * again; nothing else on the node's loopback is reachable through it. Answers go back as
 * the engine writes them (SSE streams piece by piece), over kept connections both ways.
 */
export class EngineProxy {
  readonly #o: EngineProxyOptions;
  readonly #front: net.Server;
  readonly #tls: https.Server;
  // No Nagle either way: a request's head and body, or an SSE event, must not wait for an ACK.
  readonly #engines = new http.Agent({ keepAlive: true, maxFreeSockets: 64, noDelay: true });
  readonly #sockets = new Set<net.Socket>();
  #routes: ReadonlyMap<string, EngineRoute> = new Map();
  #material: TlsMaterial | undefined;

  private constructor(o: EngineProxyOptions) {
    this.#o = o;
    // No certificate until the control plane gives one: handshakes fail until then.
    this.#tls = https.createServer({}, (req, res) => this.#forward(req, res));
    // Longer than the gateway keeps an idle connection, so the gateway is the one to close it.
    this.#tls.keepAliveTimeout = 65_000;
    this.#tls.on('tlsClientError', (e) => o.logger.debug({ err: e.message }, 'engine proxy: TLS refused'));
    // The first byte says whether a client speaks TLS; one that does not is told so in
    // plain HTTP, rather than left with a reset it cannot read.
    this.#front = net.createServer({ noDelay: true }, (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => socket.destroy());
      socket.once('data', (first: Buffer) => {
        socket.pause();
        socket.unshift(first);
        if (first[0] === tlsHandshake) this.#tls.emit('connection', socket);
        else refusePlain(socket);
      });
    });
  }

  /** Listens now; it serves once `setMaterial` gave it a certificate. */
  static async start(o: EngineProxyOptions): Promise<EngineProxy> {
    const p = new EngineProxy(o);
    await new Promise<void>((resolve, reject) => {
      p.#front.once('error', reject);
      p.#front.listen(o.port, o.host, () => {
        p.#front.off('error', reject);
        resolve();
      });
    });
    return p;
  }

  /** The port it listens on. */
  get port(): number {
    return (this.#front.address() as net.AddressInfo).port;
  }

  /** Whether it has a certificate to serve with. */
  get serving(): boolean {
    return this.#material !== undefined;
  }

  /** The certificate to serve with; a new one (renewed) takes effect for new connections. */
  setMaterial(m: TlsMaterial): void {
    if (this.#material?.cert === m.cert && this.#material.key === m.key && this.#material.ca === m.ca) return;
    this.#tls.setSecureContext({ cert: m.cert, key: m.key, ca: m.ca });
    this.#material = m;
    this.#o.logger.info({ port: this.port }, 'engine proxy serving TLS');
  }

  /** The replicas it forwards to: every shard that serves HTTP on this node. */
  setRoutes(routes: ReadonlyMap<string, EngineRoute>): void {
    this.#routes = routes;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#front.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    this.#engines.destroy();
    await closed;
  }

  #forward(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = req.url ?? '/';
    const end = url.indexOf('/', engineProxyPrefix.length);
    const replica = url.startsWith(engineProxyPrefix)
      ? url.slice(engineProxyPrefix.length, end < 0 ? undefined : end)
      : '';
    const route = replica === '' ? undefined : this.#routes.get(replica);
    if (route === undefined) {
      req.resume();
      // A replica moved away is a 503, which the gateway retries on another; a path without one, 404.
      answer(
        res,
        replica === '' ? 404 : 503,
        replica === ''
          ? `${url.split('?')[0] ?? ''} names no replica: the engine proxy forwards /r/<replica>/<path> to that replica's engine`
          : `replica ${replica} does not run on this node (anymore): the gateway's route table is older than its placement, and will change`,
      );
      return;
    }
    if (route.apiKey !== '' && !sameKey(req.headers.authorization, `Bearer ${route.apiKey}`)) {
      req.resume();
      answer(
        res,
        401,
        `replica ${replica} takes requests with its engine key only (Authorization: Bearer <key>)`,
      );
      return;
    }
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) if (!hopByHop.has(k)) headers[k] = v;
    headers['host'] = `127.0.0.1:${route.port}`;
    const upstream = http.request({
      host: '127.0.0.1',
      port: route.port,
      method: req.method,
      path: end < 0 ? '/' : url.slice(end),
      headers,
      agent: this.#engines,
    });
    upstream.on('response', (answerIn) => {
      const out: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(answerIn.headers))
        if (!hopByHop.has(k) && v !== undefined) out[k] = v;
      res.writeHead(answerIn.statusCode ?? 502, out);
      // Each piece goes out as it came: an SSE event is not held for the next.
      answerIn.pipe(res);
      answerIn.on('error', () => res.destroy());
    });
    upstream.on('error', (e) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      answer(
        res,
        502,
        `replica ${replica}'s engine on 127.0.0.1:${route.port} did not answer: ${messageOf(e)}`,
      );
    });
    // The client went away before the answer ended: the engine sees the close and stops the work.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }
}

/** The replicas a node's forwarder serves, from its assignment: each shard that serves HTTP (rank 0). */
export function engineRoutesOf(shards: readonly AssignedShard[]): Map<string, EngineRoute> {
  const routes = new Map<string, EngineRoute>();
  for (const s of shards) if (s.rank === 0) routes.set(s.replica, { port: s.port, apiKey: s.api_key });
  return routes;
}

function sameKey(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A refusal in OpenAI's error shape, which the gateway and clients already read. */
function answer(res: http.ServerResponse, status: number, message: string): void {
  const type =
    status === 401
      ? 'authentication_error'
      : status === 404
        ? 'not_found_error'
        : status === 503
          ? 'service_unavailable'
          : 'api_error';
  const body = JSON.stringify({ error: { message, type, code: status } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function refusePlain(socket: net.Socket): void {
  const body = JSON.stringify({
    error: {
      message: 'this is the engine proxy of an llmgw node: it speaks TLS only; connect with https://',
      type: 'invalid_request_error',
      code: 400,
    },
  });
  socket.end(
    `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
