import type { Socket } from 'node:net';

import { closeAfterAnswer, refusalText, tooManyConnections, type RequestLimits } from './answers.js';
import { ClientConnections } from './client-connections.js';
import type { FastLane } from './fast-lane.js';
import { FrontConnection, type Door } from './front-connection.js';

export interface FrontDoorOptions {
  lanes: readonly FastLane[];
  /** Everything the lanes do not take, with the bytes already read from it: node:http's. */
  handOff: (socket: Socket, read: Buffer | undefined) => void;
  /** An idle connection is closed after this (node:http's keepAliveTimeout). */
  keepAliveMs?: number;
  /** A request's head must come whole within this of its first byte, else 408 (node:http's headersTimeout). */
  headMs?: number;
  /** A request's head and body must come within this, else 408 (node:http's requestTimeout). */
  requestMs?: number;
  /** Connections one client address may hold open, handed-off ones included; past it, 503 and close. Unbounded when unset. */
  maxConnectionsPerClient?: number;
}

/**
 * The first reader of every connection. Requests on a fast lane (the gateway's /v1) are
 * read and answered here, without node:http's request and response objects, which cost
 * more than the rest of a proxied request together. Anything else (another path, an
 * upgrade, chunked or oversized bodies, a head it does not understand or that is over
 * node:http's limit) is handed to node:http with the bytes read so far, between requests,
 * and stays there: what the front door takes is a part of what node:http takes, so a
 * request gets one answer whichever reads it. Its own answers (408 for a head or request
 * too slow, 503 past the connections of one address) node:http gives too, in the same words.
 */
export class FrontDoor implements Door {
  readonly #o: FrontDoorOptions;
  /** @internal */
  readonly limits: RequestLimits;
  /** @internal */
  readonly keepAliveMs: number;
  readonly #connections = new Set<FrontConnection>();
  /** Connections open by client address, counted while a bound is set (a worker's peers' too). */
  readonly clients: ClientConnections | undefined;
  readonly #sweeper: NodeJS.Timeout;
  #closing = false;

  constructor(options: FrontDoorOptions) {
    this.#o = options;
    this.limits = { headMs: options.headMs ?? 10_000, requestMs: options.requestMs ?? 300_000 };
    this.keepAliveMs = options.keepAliveMs ?? 65_000;
    const max = options.maxConnectionsPerClient;
    this.clients = max === undefined ? undefined : new ClientConnections(max);
    this.#sweeper = setInterval(() => this.#sweep(), 1000);
    this.#sweeper.unref();
  }

  /** Connections this door still holds (not handed off). */
  get size(): number {
    return this.#connections.size;
  }

  get closing(): boolean {
    return this.#closing;
  }

  accept(socket: Socket): void {
    if (this.clients !== undefined && !admit(socket, this.clients)) return;
    if (this.#o.lanes.length === 0) {
      this.#o.handOff(socket, undefined);
      return;
    }
    socket.setNoDelay(true);
    this.#connections.add(new FrontConnection(socket, this));
  }

  /** Answers in flight finish (with `Connection: close`); idle connections close now. */
  closeIdle(): void {
    this.#closing = true;
    clearInterval(this.#sweeper);
    for (const c of this.#connections) if (c.idle) c.socket.destroy();
  }

  closeAll(): void {
    this.#closing = true;
    for (const c of this.#connections) c.socket.destroy();
  }

  /** @internal */
  laneFor(url: string): FastLane | undefined {
    for (const lane of this.#o.lanes) if (url.startsWith(lane.prefix)) return lane;
    return undefined;
  }

  /** @internal */
  handOff(c: FrontConnection, read: Buffer | undefined): void {
    this.#connections.delete(c);
    this.#o.handOff(c.socket, read);
  }

  /** @internal */
  forget(c: FrontConnection): void {
    this.#connections.delete(c);
  }

  #sweep(): void {
    const now = performance.now();
    for (const c of this.#connections) c.sweep(now);
  }
}

/** Counts a new connection against its address; past the bound it is answered 503 and closed. */
function admit(socket: Socket, clients: ClientConnections): boolean {
  const address = socket.remoteAddress;
  // No address: the client is already gone.
  if (address === undefined) {
    socket.destroy();
    return false;
  }
  if (!clients.admit(address)) {
    closeAfterAnswer(socket, refusalText(tooManyConnections(address, clients.max)));
    return false;
  }
  socket.once('close', () => clients.release(address));
  return true;
}
