import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import {
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net';
import type { Duplex } from 'node:stream';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';

import { LlmgwError, messageOf } from '../core/errors.js';
import {
  closeAfterAnswer,
  noHost,
  noUpgrade,
  refusalBody,
  refusalText,
  type RequestLimits,
} from './answers.js';
import type { ClientConnections } from './client-connections.js';
import type { FastHandler, FastLane } from './fast-lane.js';
import { FrontDoor } from './front-door.js';
import { localUrl, parseListen } from './listen.js';
import { nodeServer } from './node-server.js';
import { acceptRelayed } from './relay-preamble.js';

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface Mount {
  /** Path prefix this handler serves: `/api/`, `/v1/`. */
  prefix: string;
  handler: RequestHandler;
}

export interface HttpServerOptions {
  /** Connections one client address may hold open at once (gateway.max_connections_per_client); unbounded when unset. */
  maxConnectionsPerClient?: number;
  /** A request's head must come whole within this of its first byte, else 408. */
  headMs?: number;
  /** A whole request must come within this, else 408. */
  requestMs?: number;
  /** Serve HTTPS with this certificate (PEM, its chain after it) and key; plain HTTP when unset. */
  tls?: ServingCertificate;
  /**
   * The public address is served by gateway workers (other processes): listen() has them
   * accept on it and listens here on their relay socket only (see src/gateway/workers).
   */
  shared?: SharedListener;
}

/** A public address bound here and accepted on by other processes, which relay what they do not serve. */
export interface SharedListener {
  /** Binds the address, has the workers accept on it, and resolves with its port once they do. */
  open(host: string | undefined, port: number, tls: ServingCertificate | undefined): Promise<number>;
  /** The unix socket the workers relay to, listened on by this server. */
  readonly relayPath: string;
  setCertificate(tls: ServingCertificate): void;
  /** The workers stop taking connections and finish theirs. */
  close(): Promise<void>;
}

export interface ServingCertificate {
  cert: string;
  key: string;
}

// The first byte of every TLS connection: a handshake record.
const tlsHandshakeByte = 0x16;

/** What answers a path no part serves. */
export const notFound: RequestHandler = (_req, res) => {
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      error: {
        code: 'not_found',
        message: 'nothing here: the API is under /api/v1, the OpenAI-compatible gateway under /v1',
      },
    }),
  );
};

/**
 * One listening socket for the control plane's parts (API, gateway, agent channel,
 * console), each mounted on a path prefix. Every connection is read first by the front
 * door, which answers the fast lanes (the gateway's /v1) itself and hands the rest to
 * node:http, with no framework on either path.
 */
export class HttpServer {
  readonly #server: Server;
  readonly #listener: NetServer;
  readonly #lanes: FastLane[] = [];
  readonly #door: FrontDoor;
  readonly #mounts: Mount[] = [];
  readonly #upgrades = new Map<string, UpgradeHandler>();
  readonly #tls: TlsServer | undefined;
  /** Connections handed to TLS, until they close (closed with the rest after the grace). */
  readonly #raw = new Set<Socket>();
  readonly #headMs: number;
  readonly #shared: SharedListener | undefined;
  #tlsPair: ServingCertificate | undefined;
  #fallback: RequestHandler = notFound;
  #upgradeFallback: UpgradeHandler | undefined;

  constructor(options: HttpServerOptions = {}) {
    const limits: RequestLimits = {
      headMs: options.headMs ?? 10_000,
      requestMs: options.requestMs ?? 300_000,
    };
    this.#server = nodeServer(limits, (req, res) => this.#request(req, res));
    this.#server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.#upgrade(req, socket, head),
    );
    this.#door = new FrontDoor({
      lanes: this.#lanes,
      keepAliveMs: this.#server.keepAliveTimeout,
      ...limits,
      ...(options.maxConnectionsPerClient === undefined
        ? {}
        : { maxConnectionsPerClient: options.maxConnectionsPerClient }),
      handOff: (socket, read) => {
        this.#server.emit('connection', socket);
        // node:http reads what comes next from the socket itself; what was read already it is given.
        if (read !== undefined) socket.emit('data', read);
      },
    });
    this.#headMs = limits.headMs;
    this.#shared = options.shared;
    this.#tlsPair = options.tls;
    // TLS in front of the front door: it reads decrypted bytes as it reads plain ones, fast lane included.
    this.#tls =
      options.tls === undefined
        ? undefined
        : createTlsServer(
            {
              ...options.tls,
              ALPNProtocols: ['http/1.1'],
              allowHalfOpen: true,
              handshakeTimeout: limits.headMs,
            },
            (socket) => this.#door.accept(socket),
          );
    // Half-open as node:http has it: a client may end its side and still read the answer.
    this.#listener = createNetServer({ allowHalfOpen: true }, (socket) => {
      // The workers' relay: decrypted already, and led by the client's address.
      if (this.#shared !== undefined) acceptRelayed(socket, (s) => this.#door.accept(s));
      else if (this.#tls === undefined) this.#door.accept(socket);
      else this.#sniff(socket, this.#tls);
    });
  }

  /** An upgrade (the agents' WebSocket channel) to the handler of its path. */
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (req.headers.host === undefined) {
      socket.end(refusalText(noHost), 'latin1');
      return;
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const handler = this.#upgrades.get(path) ?? this.#upgradeFallback;
    if (handler === undefined) {
      closeAfterAnswer(socket, refusalText(noUpgrade(path, [...this.#upgrades.keys()])));
      return;
    }
    handler(req, socket, head);
  }

  /**
   * A connection to an HTTPS address: a TLS handshake goes to TLS; plain HTTP (an http://
   * URL by mistake) is answered in plain words with the URL to use, not a reset.
   */
  #sniff(socket: Socket, tls: TlsServer): void {
    socket.setTimeout(this.#headMs, () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.setTimeout(0);
      socket.pause();
      if (first[0] === tlsHandshakeByte) {
        // The TLS socket reads what was put back before reading on from the connection.
        socket.unshift(first);
        // The TLS layer owns the connection now: a client gone mid-handshake must close it here too.
        socket.allowHalfOpen = false;
        this.#raw.add(socket);
        socket.once('close', () => this.#raw.delete(socket));
        tls.emit('connection', socket);
        return;
      }
      const host = /\r\nhost:[ \t]*([^\r\n]+)/i.exec(first.toString('latin1'))?.[1]?.trim() ?? 'HOST:PORT';
      const body = JSON.stringify({
        error: {
          code: 'invalid_argument',
          message: `this address serves HTTPS only: use https://${host}/ (TLS is on because it listens beyond loopback or tls.enabled is set)`,
        },
      });
      closeAfterAnswer(
        socket,
        `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
    socket.on('error', () => socket.destroy());
  }

  /** Connections open per client address, when bounded: a gateway worker tells it its peers'. */
  get clients(): ClientConnections | undefined {
    return this.#door.clients;
  }

  /** Whether it serves HTTPS. */
  get secure(): boolean {
    return this.#tls !== undefined;
  }

  /** Replaces the serving certificate for new connections (renewal); open ones keep theirs. */
  setCertificate(tls: ServingCertificate): void {
    if (this.#tls === undefined)
      throw new LlmgwError(
        'internal',
        'this server was started without TLS: its certificate cannot be replaced',
      );
    this.#tls.setSecureContext({ ...tls });
    this.#tlsPair = tls;
    this.#shared?.setCertificate(tls);
  }

  #request(req: IncomingMessage, res: ServerResponse): void {
    // HTTP/1.1 requires a Host (RFC 9112, 3.2); the front door leaves a request without one here.
    if (req.headers.host === undefined && req.httpVersion === '1.1') {
      const body = refusalBody(noHost);
      res.writeHead(400, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      });
      res.end(body);
      return;
    }
    const path = req.url ?? '/';
    const mount = this.#mounts.find((m) => path.startsWith(m.prefix));
    (mount?.handler ?? this.#fallback)(req, res);
  }

  /**
   * Serves a path prefix on the front door's fast path; requests it cannot take there
   * (chunked or larger bodies, odd heads) reach `fallback`, a node:http handler.
   */
  fastLane(
    prefix: string,
    o: { maxBodyBytes: number; handler: FastHandler; fallback: RequestHandler },
  ): void {
    this.#lanes.push({ prefix, maxBodyBytes: o.maxBodyBytes, handler: o.handler });
    this.#lanes.sort((a, b) => b.prefix.length - a.prefix.length);
    this.mount(prefix, o.fallback);
  }

  mount(prefix: string, handler: RequestHandler): void {
    this.#mounts.push({ prefix, handler });
    // Longest prefix first, so /api/v1/agent wins over /api/.
    this.#mounts.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  onUpgrade(path: string, handler: UpgradeHandler): void {
    this.#upgrades.set(path, handler);
  }

  /** Takes upgrades of every path no other handler takes (a gateway worker relays them to its primary). */
  upgradeFallback(handler: UpgradeHandler): void {
    this.#upgradeFallback = handler;
  }

  fallback(handler: RequestHandler): void {
    this.#fallback = handler;
  }

  /** Listens on HOST:PORT; resolves with the URL clients on this machine use. */
  listen(listen: string): Promise<string> {
    const { host, port } = parseListen(listen);
    if (this.#shared !== undefined) return this.#listenShared(listen, host, port, this.#shared);
    return new Promise((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => {
        const hint =
          e.code === 'EADDRINUSE'
            ? `: another process listens there; stop it, or set listen: to another port`
            : '';
        reject(
          new LlmgwError('unavailable', `cannot listen on ${listen}: ${messageOf(e)}${hint}`, { cause: e }),
        );
      };
      this.#listener.once('error', onError);
      // Room for a fleet's agents dialling at once after a restart (Node's default is 511;
      // the kernel caps it at net.core.somaxconn): past it, connections are dropped or reset.
      this.#listener.listen({ host, port, backlog: 4096 }, () => {
        this.#listener.off('error', onError);
        // node:http starts its request-timeout checks when it hears it is listening; the
        // socket is the front door's, so it is told.
        this.#server.emit('listening');
        const address = this.#listener.address() as AddressInfo;
        resolve(localUrl(host, address.port, this.#tls === undefined ? 'http' : 'https'));
      });
    });
  }

  /** The public address through the workers; this server listens on their relay socket. */
  async #listenShared(
    listen: string,
    host: string | undefined,
    port: number,
    shared: SharedListener,
  ): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#listener.once('error', reject);
      this.#listener.listen({ path: shared.relayPath, backlog: 4096 }, () => {
        this.#listener.off('error', reject);
        resolve();
      });
    });
    let bound: number;
    try {
      bound = await shared.open(host, port, this.#tlsPair);
    } catch (e) {
      await new Promise((resolve) => this.#listener.close(resolve));
      await shared.close();
      const hint =
        (e as NodeJS.ErrnoException).code === 'EADDRINUSE'
          ? ': another process listens there; stop it, or set listen: to another port'
          : '';
      throw new LlmgwError('unavailable', `cannot listen on ${listen}: ${messageOf(e)}${hint}`, { cause: e });
    }
    this.#server.emit('listening');
    return localUrl(host, bound, this.#tlsPair === undefined ? 'http' : 'https');
  }

  /** Accepts on a listening socket another process bound (a gateway worker's share of the public address). */
  listenOn(handle: object): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#listener.once('error', reject);
      this.#listener.listen(handle, 4096, () => {
        this.#listener.off('error', reject);
        this.#server.emit('listening');
        resolve();
      });
    });
  }

  /**
   * Stops taking connections, lets requests in flight finish for up to `graceMs`,
   * then closes whatever is left.
   */
  async close(graceMs = 10_000): Promise<void> {
    // The workers stop accepting and finish their requests meanwhile; connections they relay end with this server's.
    await Promise.all([this.#shared?.close(), this.#closeOwn(graceMs)]);
  }

  async #closeOwn(graceMs: number): Promise<void> {
    if (!this.#listener.listening) return;
    // Resolves when every connection it accepted is gone, node:http's included.
    const closed = new Promise<void>((resolve) =>
      this.#listener.close(() => {
        resolve();
      }),
    );
    this.#door.closeIdle();
    this.#server.closeIdleConnections();
    // node:http closes a kept connection after its answer only once it knows it is closing.
    this.#server.close();
    const timer = setTimeout(() => {
      this.#door.closeAll();
      this.#server.closeAllConnections();
      for (const socket of this.#raw) socket.destroy();
    }, graceMs);
    await closed;
    clearTimeout(timer);
  }
}
