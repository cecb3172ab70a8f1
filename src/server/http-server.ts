import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';

import { LlmgwError, messageOf } from '../core/errors.js';
import { FrontDoor, type FastHandler, type FastLane } from '../http1/front-door.js';

import { localUrl, parseListen } from './listen.js';

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface Mount {
  /** Path prefix this handler serves: `/api/`, `/v1/`. */
  prefix: string;
  handler: RequestHandler;
}

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
  #fallback: RequestHandler = (_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code: 'not_found', message: 'nothing here: the API is under /api/v1, the OpenAI-compatible gateway under /v1' } }));
  };

  constructor() {
    this.#server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
      const path = req.url ?? '/';
      const mount = this.#mounts.find((m) => path.startsWith(m.prefix));
      (mount?.handler ?? this.#fallback)(req, res);
    });
    this.#server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      const handler = this.#upgrades.get(path);
      if (handler === undefined) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
        return;
      }
      handler(req, socket, head);
    });
    const keepAliveMs = this.#server.keepAliveTimeout;
    this.#door = new FrontDoor({
      lanes: this.#lanes,
      keepAliveMs,
      requestMs: this.#server.requestTimeout,
      handOff: (socket, read) => {
        this.#server.emit('connection', socket);
        // node:http reads what comes next from the socket itself; what was read already it is given.
        if (read !== undefined) socket.emit('data', read);
      },
    });
    // Half-open as node:http has it: a client may end its side and still read the answer.
    this.#listener = createNetServer({ allowHalfOpen: true }, (socket) => this.#door.accept(socket));
  }

  /**
   * Serves a path prefix on the front door's fast path; requests it cannot take there
   * (chunked or larger bodies, odd heads) reach `fallback`, a node:http handler.
   */
  fastLane(prefix: string, o: { maxBodyBytes: number; handler: FastHandler; fallback: RequestHandler }): void {
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

  fallback(handler: RequestHandler): void {
    this.#fallback = handler;
  }

  /** Listens on HOST:PORT; resolves with the URL clients on this machine use. */
  listen(listen: string): Promise<string> {
    const { host, port } = parseListen(listen);
    return new Promise((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => {
        const hint = e.code === 'EADDRINUSE' ? `: another process listens there; stop it, or set listen: to another port` : '';
        reject(new LlmgwError('unavailable', `cannot listen on ${listen}: ${messageOf(e)}${hint}`, { cause: e }));
      };
      this.#listener.once('error', onError);
      this.#listener.listen({ host, port }, () => {
        this.#listener.off('error', onError);
        // node:http starts its request-timeout checks when it hears it is listening; the
        // socket is the front door's, so it is told.
        this.#server.emit('listening');
        const address = this.#listener.address() as AddressInfo;
        resolve(localUrl(host, address.port));
      });
    });
  }

  /**
   * Stops taking connections, lets requests in flight finish for up to `graceMs`,
   * then closes whatever is left.
   */
  async close(graceMs = 10_000): Promise<void> {
    if (!this.#listener.listening) return;
    // Resolves when every connection it accepted is gone, node:http's included.
    const closed = new Promise<void>((resolve) => this.#listener.close(() => { resolve(); }));
    this.#door.closeIdle();
    this.#server.closeIdleConnections();
    // node:http closes a kept connection after its answer only once it knows it is closing.
    this.#server.close();
    const timer = setTimeout(() => {
      this.#door.closeAll();
      this.#server.closeAllConnections();
    }, graceMs);
    await closed;
    clearTimeout(timer);
  }
}
