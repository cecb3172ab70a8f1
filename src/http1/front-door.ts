import type { Socket } from 'node:net';

import { headEnd, maxHeadBytes, parseRequestHead } from './heads.js';

/** Bytes of requests sent ahead (pipelined) that are read while one is being answered. */
const maxAheadBytes = 64 * 1024;

/** A request the front door read whole: head and body. */
export interface FastRequest {
  readonly method: string;
  readonly url: string;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The body; rejects with BodyTooLargeError past `limit`. */
  body(limit: number): Promise<Buffer>;
}

export class BodyTooLargeError extends Error {
  readonly limit: number;

  constructor(limit: number) {
    super(`the request body is over ${limit} bytes`);
    this.name = 'BodyTooLargeError';
    this.limit = limit;
  }
}

export type FastHandler = (req: FastRequest, res: FastResponse) => void;

export interface FastLane {
  /** Path prefix: `/v1/`. */
  prefix: string;
  /** A longer body is left to node:http (the handler answers it there, 413 and all). */
  maxBodyBytes: number;
  handler: FastHandler;
}

export interface FrontDoorOptions {
  lanes: readonly FastLane[];
  /** Everything the lanes do not take, with the bytes already read from it: node:http's. */
  handOff: (socket: Socket, read: Buffer | undefined) => void;
  /** An idle connection is closed after this (node:http's keepAliveTimeout). */
  keepAliveMs?: number;
  /** A request's head and body must arrive within this (node:http's requestTimeout). */
  requestMs?: number;
}

/**
 * The first reader of every connection. Requests on a fast lane (the gateway's /v1) are
 * read and answered here, without node:http's request and response objects, which cost
 * more than the rest of a proxied request together. Anything else (another path, an
 * upgrade, chunked or oversized bodies, a head it does not understand) is handed to
 * node:http with the bytes read so far, between requests, and stays there.
 */
export class FrontDoor {
  readonly #o: FrontDoorOptions;
  readonly #connections = new Set<FrontConnection>();
  readonly #sweeper: NodeJS.Timeout;
  #closing = false;

  constructor(options: FrontDoorOptions) {
    this.#o = options;
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
    const keepAlive = this.#o.keepAliveMs ?? 65_000;
    const request = this.#o.requestMs ?? 300_000;
    for (const c of this.#connections) {
      if (c.active !== undefined) continue;
      const limit = c.hasPartial ? request : keepAlive;
      if (now - c.since >= limit) c.socket.destroy();
    }
  }
}

/** @internal One client connection while the front door reads it. */
class FrontConnection {
  readonly socket: Socket;
  readonly #door: FrontDoor;
  /** Bytes read and not yet a whole request. */
  #parts: Buffer[] = [];
  #size = 0;
  /** Once a head is read: the bytes the whole request takes. */
  #need = 0;
  #head: ReturnType<typeof parseRequestHead>;
  #headLength = 0;
  active: FastResponse | undefined;
  /** When the connection last went idle, or its current request began. */
  since = performance.now();
  readonly #onData = (d: Buffer) => this.#read(d);
  // 'close' follows an error; an answer in flight learns of it there.
  readonly #onError = () => undefined;
  readonly #onClose = () => {
    this.#door.forget(this);
    this.active?.clientGone();
  };
  /**
   * The client ended its side. As node:http does by default, that is the client going
   * away: what it asked is cancelled (a closed HTTP client sends a FIN, rarely a reset).
   */
  readonly #onEnd = () => {
    this.#stopReading();
    this.active?.clientGone();
    this.socket.end();
  };

  constructor(socket: Socket, door: FrontDoor) {
    this.socket = socket;
    this.#door = door;
    socket.on('data', this.#onData);
    socket.on('error', this.#onError);
    socket.on('close', this.#onClose);
    socket.on('end', this.#onEnd);
  }

  get idle(): boolean {
    return this.active === undefined && this.#size === 0;
  }

  get hasPartial(): boolean {
    return this.#size > 0;
  }

  #read(d: Buffer): void {
    if (this.#size === 0) this.since = performance.now();
    this.#parts.push(d);
    this.#size += d.length;
    if (this.active === undefined) this.next();
    // Requests sent ahead while one is answered wait here, up to a bound; past it the
    // client is not read until the answer is out.
    else if (this.#size > maxAheadBytes) this.socket.pause();
  }

  /** Takes the next whole request, if the bytes hold one. */
  next(): void {
    while (this.active === undefined && this.#size > 0) {
      if (this.#head === undefined) {
        const bytes = this.#joined();
        const end = bytes.indexOf(headEnd);
        if (end < 0) {
          if (bytes.length > maxHeadBytes) this.#handOff();
          return;
        }
        const head = parseRequestHead(bytes.toString('latin1', 0, end));
        const lane = head === undefined ? undefined : this.#door.laneFor(head.url);
        if (head === undefined || lane === undefined || head.contentLength > lane.maxBodyBytes) {
          this.#handOff();
          return;
        }
        this.#head = head;
        this.#headLength = end + 4;
        this.#need = end + 4 + head.contentLength;
      }
      if (this.#size < this.#need) return;
      const bytes = this.#joined();
      const head = this.#head;
      const lane = this.#door.laneFor(head.url) as FastLane;
      const body = bytes.subarray(this.#headLength, this.#need);
      const rest = bytes.subarray(this.#need);
      this.#parts = rest.length === 0 ? [] : [rest];
      this.#size = rest.length;
      this.#head = undefined;
      // The last request this connection takes: what follows it is not read (RFC 9112, 9.6).
      if (head.close) this.#stopReading();
      const door = this.#door;
      const res = new FastResponse(this.socket, () => head.close || door.closing, () => this.#answered(res));
      this.active = res;
      this.since = performance.now();
      lane.handler(new ReadRequest(head.method, head.url, head.headers, body), res);
    }
  }

  #answered(res: FastResponse): void {
    if (this.active !== res) return;
    this.active = undefined;
    this.since = performance.now();
    if (res.closeAfter) {
      this.socket.end();
      this.#door.forget(this);
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    this.next();
  }

  /** Nothing more is taken from this client (it asked to close, or went away). */
  #stopReading(): void {
    this.socket.off('data', this.#onData);
    this.#parts = [];
    this.#size = 0;
    this.#head = undefined;
  }

  #joined(): Buffer {
    if (this.#parts.length === 1) return this.#parts[0] as Buffer;
    const all = Buffer.concat(this.#parts, this.#size);
    this.#parts = [all];
    return all;
  }

  #handOff(): void {
    this.socket.off('data', this.#onData);
    this.socket.off('close', this.#onClose);
    this.socket.off('error', this.#onError);
    this.socket.off('end', this.#onEnd);
    const read = this.#size === 0 ? undefined : this.#joined();
    this.#parts = [];
    this.#size = 0;
    this.#door.handOff(this, read);
  }
}

class ReadRequest implements FastRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly #body: Buffer;

  constructor(method: string, url: string, headers: Record<string, string>, body: Buffer) {
    this.method = method;
    this.url = url;
    this.headers = headers;
    this.#body = body;
  }

  body(limit: number): Promise<Buffer> {
    return this.#body.length > limit ? Promise.reject(new BodyTooLargeError(limit)) : Promise.resolve(this.#body);
  }
}

const reasons: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  413: 'Payload Too Large',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

let dateSecond = 0;
let dateText = '';
/** The Date header, made once a second. */
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

type HeaderValue = string | number | readonly string[];

/**
 * An answer written straight to the socket, with the part of node:http's ServerResponse
 * the gateway uses. The head waits for the first bytes of the body so that a small answer
 * goes out in one write; without a Content-Length the body is sent chunked.
 */
export class FastResponse {
  readonly #socket: Socket;
  readonly #done: () => void;
  readonly #closeAfter: () => boolean;
  #head: string | undefined;
  #chunked = false;
  #bodyless = false;
  #sent = false;
  #finished = false;
  #gone = false;
  #onClose: (() => void)[] = [];

  constructor(socket: Socket, closeAfter: () => boolean, done: () => void) {
    this.#socket = socket;
    this.#closeAfter = closeAfter;
    this.#done = done;
  }

  /** The connection closes after this answer: the client asked, or the server is stopping. */
  get closeAfter(): boolean {
    return this.#closeAfter();
  }

  get headersSent(): boolean {
    return this.#sent;
  }

  get writableFinished(): boolean {
    return this.#finished;
  }

  writeHead(status: number, headers: Readonly<Record<string, HeaderValue | undefined>> = {}): this {
    if (this.#sent) throw new Error('the head was already written');
    this.#sent = true;
    let head = `HTTP/1.1 ${status} ${reasons[status] ?? 'Status'}\r\ndate: ${httpDate()}\r\n`;
    let length = false;
    for (const k in headers) {
      const v = headers[k];
      if (v === undefined) continue;
      const name = k.toLowerCase();
      if (name === 'content-length') length = true;
      if (name === 'connection' || name === 'transfer-encoding' || name === 'keep-alive' || name === 'date') continue;
      if (Array.isArray(v)) for (const one of v) head += `${k}: ${String(one)}\r\n`;
      else head += `${k}: ${String(v)}\r\n`;
    }
    this.#bodyless = status === 204 || status === 304;
    this.#chunked = !length && !this.#bodyless;
    if (this.#chunked) head += 'transfer-encoding: chunked\r\n';
    if (this.closeAfter) head += 'connection: close\r\n';
    this.#head = `${head}\r\n`;
    return this;
  }

  write(chunk: Buffer | string): boolean {
    if (this.#finished || this.#gone) return false;
    if (!this.#sent) this.writeHead(200);
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (data.length === 0) return true;
    if (this.#chunked) return this.#send(`${data.length.toString(16)}\r\n`, data, '\r\n');
    return this.#send('', data, '');
  }

  end(chunk?: Buffer | string): this {
    if (this.#finished) return this;
    if (!this.#sent) {
      const length = chunk === undefined ? 0 : Buffer.byteLength(chunk);
      this.writeHead(200, { 'content-length': length });
    }
    this.#finished = true;
    this.#onClose = [];
    if (!this.#gone) {
      const data = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (this.#chunked) {
        if (data !== undefined && data.length > 0) this.#send(`${data.length.toString(16)}\r\n`, data, '\r\n0\r\n\r\n');
        else this.#send('0\r\n\r\n', undefined, '');
      } else {
        this.#send('', data, '');
      }
    }
    this.#done();
    return this;
  }

  once(event: 'drain' | 'close', listener: () => void): this {
    if (event === 'drain') this.#socket.once('drain', listener);
    else if (!this.#finished) this.#onClose.push(listener);
    return this;
  }

  destroy(): void {
    this.#socket.destroy();
  }

  /** @internal The client closed the connection. */
  clientGone(): void {
    this.#gone = true;
    const listeners = this.#onClose;
    this.#onClose = [];
    for (const l of listeners) l();
  }

  /** Writes what is pending of the head, then the data, in one call where it is small. */
  #send(before: string, data: Buffer | undefined, after: string): boolean {
    const head = this.#head ?? '';
    this.#head = undefined;
    const prefix = head + before;
    if (this.#bodyless || data === undefined || data.length === 0) {
      const text = prefix + after;
      return text === '' ? true : this.#socket.write(text, 'latin1');
    }
    if (data.length < 16 * 1024) {
      const total = Buffer.allocUnsafe(prefix.length + data.length + after.length);
      total.write(prefix, 0, 'latin1');
      data.copy(total, prefix.length);
      if (after !== '') total.write(after, prefix.length + data.length, 'latin1');
      return this.#socket.write(total);
    }
    this.#socket.cork();
    if (prefix !== '') this.#socket.write(prefix, 'latin1');
    this.#socket.write(data);
    const ok = after === '' ? true : this.#socket.write(after, 'latin1');
    this.#socket.uncork();
    return ok && !this.#socket.writableNeedDrain;
  }
}
