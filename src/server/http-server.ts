import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

import { LlmgwError, messageOf } from '../core/errors.js';

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
 * console), each mounted on a path prefix. Plain node:http underneath so that the
 * gateway's hot path pays for no framework.
 */
export class HttpServer {
  readonly #server: Server;
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
      this.#server.once('error', onError);
      this.#server.listen({ host, port }, () => {
        this.#server.off('error', onError);
        const address = this.#server.address() as AddressInfo;
        resolve(localUrl(host, address.port));
      });
    });
  }

  /**
   * Stops taking connections, lets requests in flight finish for up to `graceMs`,
   * then closes whatever is left.
   */
  async close(graceMs = 10_000): Promise<void> {
    if (!this.#server.listening) return;
    const closed = new Promise<void>((resolve) => this.#server.close(() => { resolve(); }));
    this.#server.closeIdleConnections();
    const timer = setTimeout(() => { this.#server.closeAllConnections(); }, graceMs);
    await closed;
    clearTimeout(timer);
  }
}
