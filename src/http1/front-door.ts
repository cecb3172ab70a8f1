import type { Socket } from 'node:net';

import {
  closeAfterAnswer,
  httpDate,
  reasonOf,
  refusalText,
  tooManyConnections,
  tooSlow,
  type RequestLimits,
} from './answers.js';
import { ClientConnections } from './client-connections.js';
import { headEnd, mayBeHead, maxHeadBytes, parseRequestHead, type RequestHead } from './heads.js';

/**
 * Bytes read ahead of need: of requests sent ahead (pipelined) while one is answered, or of
 * a body its handler has not asked for yet. Past it, the client is not read.
 */
const maxAheadBytes = 64 * 1024;

/**
 * A request on a fast lane, handed to its handler once its head is read. The body is read
 * when the handler asks for it; one that answers without asking (a refusal from the head:
 * no key) leaves it unread, and that answer closes the connection and says so. So a
 * refused request costs no more than the bytes read ahead of need.
 */
export interface FastRequest {
  readonly method: string;
  readonly url: string;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /**
   * The whole body; rejects with BodyTooLargeError past `limit`, and with
   * RequestAbortedError when the client goes away or is too slow to send it.
   */
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

/** The body of a request did not come whole: its client went away, or did not send it in time. */
export class RequestAbortedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestAbortedError';
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
export class FrontDoor {
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

/** @internal What an answer tells the connection it is written on. */
interface ResponseOwner {
  /** Whether an answer whose head is written now is the connection's last. */
  closesAfter(): boolean;
  /** The answer is written whole. */
  answered(res: FastResponse): void;
}

/** @internal One client connection while the front door reads it. */
class FrontConnection implements ResponseOwner {
  readonly socket: Socket;
  readonly #door: FrontDoor;
  /** Bytes read and not yet taken: a head, or the active request's body, and what follows. */
  #parts: Buffer[] = [];
  #size = 0;
  /** The answer of the request being served. */
  active: FastResponse | undefined;
  /** The request being served. */
  #request: ReadRequest | undefined;
  /** Bytes of its body still to come. */
  #bodyLeft = 0;
  /** The request being served is the last this connection takes: it asked to close. */
  #last = false;
  /** When the connection last went idle, a head began to come, or the current request began. */
  since = performance.now();
  readonly #onData = (d: Buffer) => this.#read(d);
  // 'close' follows an error; an answer in flight learns of it there.
  readonly #onError = () => undefined;
  readonly #onClose = () => {
    this.#door.forget(this);
    this.active?.clientGone();
    this.#request?.abort('the client closed the connection before the request body came whole');
  };
  /**
   * The client ended its side. As node:http does by default, that is the client going
   * away: what it asked is cancelled (a closed HTTP client sends a FIN, rarely a reset).
   */
  readonly #onEnd = () => {
    this.#stopReading();
    this.active?.clientGone();
    this.#request?.abort('the client closed its side before the request body came whole');
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

  #read(d: Buffer): void {
    if (this.#size === 0 && this.active === undefined) this.since = performance.now();
    this.#parts.push(d);
    this.#size += d.length;
    if (this.active === undefined) {
      this.next();
    } else if (this.#bodyLeft > 0) {
      if (this.#size >= this.#bodyLeft) this.#bodyCame();
      // A body not asked for yet (its handler checks the key first) is read only so far.
      else if (this.#request?.wanted === false && this.#size > maxAheadBytes) this.socket.pause();
    } else if (this.#size > maxAheadBytes) {
      // Requests sent ahead while one is answered wait here, up to a bound; past it the
      // client is not read until the answer is out.
      this.socket.pause();
    }
  }

  /** Takes the next request, if the bytes hold its head. */
  next(): void {
    while (this.active === undefined && this.#size > 0) {
      const bytes = this.#joined();
      const end = bytes.indexOf(headEnd);
      if (end < 0) {
        // A head over node:http's limit, or one that cannot become a request the fast path
        // reads (TLS bytes, a bare LF), is node:http's to answer, now.
        if (bytes.length > maxHeadBytes || !mayBeHead(bytes)) this.#handOff();
        return;
      }
      const head = end + 4 > maxHeadBytes ? undefined : parseRequestHead(bytes.toString('latin1', 0, end));
      const lane = head === undefined ? undefined : this.#door.laneFor(head.url);
      if (head === undefined || lane === undefined || head.contentLength > lane.maxBodyBytes) {
        this.#handOff();
        return;
      }
      this.#take(head, lane, bytes, end + 4);
    }
  }

  /** Hands a request to its lane, with its body if that has come whole. */
  #take(head: RequestHead, lane: FastLane, bytes: Buffer, start: number): void {
    const end = start + head.contentLength;
    const whole = end <= bytes.length;
    const rest = bytes.subarray(whole ? end : start);
    this.#parts = rest.length === 0 ? [] : [rest];
    this.#size = rest.length;
    const req = new ReadRequest(head, whole ? bytes.subarray(start, end) : undefined, this);
    this.#bodyLeft = whole ? 0 : head.contentLength;
    this.#request = req;
    // The last request this connection takes: what follows it is not read (RFC 9112, 9.6).
    this.#last = head.close;
    if (head.close && whole) this.#stopReading();
    const res = new FastResponse(this.socket, this, head.method === 'HEAD');
    this.active = res;
    this.since = performance.now();
    lane.handler(req, res);
  }

  /** The body of the request being served has come whole. */
  #bodyCame(): void {
    const bytes = this.#joined();
    const n = this.#bodyLeft;
    const rest = bytes.subarray(n);
    this.#parts = rest.length === 0 ? [] : [rest];
    this.#size = rest.length;
    this.#bodyLeft = 0;
    this.#request?.came(bytes.subarray(0, n));
    if (this.#last) this.#stopReading();
    else if (this.#size > maxAheadBytes) this.socket.pause();
  }

  /** @internal The handler asked for the body: read on. */
  wantBody(): void {
    if (this.socket.isPaused()) this.socket.resume();
  }

  /**
   * @internal Whether the answer now begun is the connection's last: the client asked, the
   * server is stopping, or the request's body was not read (a refusal from the head), as
   * node:http's answers here have it (see ./http-server.ts): the bytes of the body
   * are not read on to find the next request.
   */
  closesAfter(): boolean {
    return this.#last || this.#door.closing || this.#request?.bodyRead === false;
  }

  /** @internal */
  answered(res: FastResponse): void {
    if (this.active !== res) return;
    this.active = undefined;
    this.#request = undefined;
    this.since = performance.now();
    if (res.closeAfter || this.#door.closing) {
      this.#close();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    this.next();
  }

  sweep(now: number): void {
    if (this.active !== undefined) {
      // An answer may take long (a stream); a body that does not come may not.
      if (this.#bodyLeft > 0 && now - this.since >= this.#door.limits.requestMs) this.#tooSlow();
      return;
    }
    if (this.#size > 0) {
      if (now - this.since >= this.#door.limits.headMs) this.#tooSlow();
    } else if (now - this.since >= this.#door.keepAliveMs) {
      this.socket.destroy();
    }
  }

  /** The request did not come whole in time: 408, as node:http answers then, and the connection closes. */
  #tooSlow(): void {
    const res = this.active;
    const req = this.#request;
    this.active = undefined;
    this.#drop();
    if (res?.headersSent === true) this.socket.destroy();
    else {
      closeAfterAnswer(this.socket, refusalText(tooSlow(this.#door.limits)));
    }
    res?.clientGone();
    req?.abort(`the request body did not come whole within ${this.#door.limits.requestMs / 1000} s`);
  }

  /** The last answer is out: the connection ends, and what the client still sends is dropped. */
  #close(): void {
    const req = this.#request;
    this.#drop();
    closeAfterAnswer(this.socket);
    req?.abort('the answer was sent before the request body came whole');
  }

  /** Nothing more is read into this connection, nor kept; the door lets go of it. */
  #drop(): void {
    this.#door.forget(this);
    this.socket.off('data', this.#onData);
    this.#parts = [];
    this.#size = 0;
    this.#request = undefined;
    this.#bodyLeft = 0;
  }

  /** Nothing more is taken from this client (it asked to close, or went away). */
  #stopReading(): void {
    this.socket.off('data', this.#onData);
    this.#parts = [];
    this.#size = 0;
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
  /** The handler asked for the body. */
  wanted = false;
  readonly #length: number;
  readonly #conn: FrontConnection;
  #body: Buffer | undefined;
  #failure: RequestAbortedError | undefined;
  #waiting: Promise<Buffer> | undefined;
  #resolve: ((body: Buffer) => void) | undefined;
  #reject: ((e: Error) => void) | undefined;

  constructor(head: RequestHead, body: Buffer | undefined, conn: FrontConnection) {
    this.method = head.method;
    this.url = head.url;
    this.headers = head.headers;
    this.#length = head.contentLength;
    this.#body = body;
    this.#conn = conn;
  }

  /** Whether the handler took the body (there is none, or it asked for it and it came). */
  get bodyRead(): boolean {
    return this.#length === 0 || (this.wanted && this.#body !== undefined);
  }

  body(limit: number): Promise<Buffer> {
    if (this.#length > limit) return Promise.reject(new BodyTooLargeError(limit));
    this.wanted = true;
    if (this.#body !== undefined) return Promise.resolve(this.#body);
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#waiting === undefined) {
      this.#waiting = new Promise((resolve, reject) => {
        this.#resolve = resolve;
        this.#reject = reject;
      });
      this.#conn.wantBody();
    }
    return this.#waiting;
  }

  /** @internal */
  came(body: Buffer): void {
    this.#body = body;
    this.#resolve?.(body);
  }

  /** @internal */
  abort(message: string): void {
    if (this.#body !== undefined || this.#failure !== undefined) return;
    this.#failure = new RequestAbortedError(message);
    this.#reject?.(this.#failure);
  }
}

type HeaderValue = string | number | readonly string[];

const closeToken = /(?:^|,)\s*close\s*(?:,|$)/i;

/**
 * An answer written straight to the socket, with the part of node:http's ServerResponse
 * the gateway uses. The head waits for the first bytes of the body so that a small answer
 * goes out in one write; without a Content-Length the body is sent chunked. An answer to
 * HEAD is its head alone, as node:http writes it.
 */
export class FastResponse {
  readonly #socket: Socket;
  readonly #owner: ResponseOwner;
  readonly #headOnly: boolean;
  #head: string | undefined;
  #chunked = false;
  #bodyless = false;
  /** Whether the connection closes after this answer, decided as its head is written. */
  #close: boolean | undefined;
  #sent = false;
  #finished = false;
  #gone = false;
  #onClose: (() => void)[] = [];

  /** @internal */
  constructor(socket: Socket, owner: ResponseOwner, headOnly: boolean) {
    this.#socket = socket;
    this.#owner = owner;
    this.#headOnly = headOnly;
  }

  /** The connection closes after this answer: the client asked, its body was not read whole, or the server is stopping. */
  get closeAfter(): boolean {
    return this.#close ?? this.#owner.closesAfter();
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
    let head = `HTTP/1.1 ${status} ${reasonOf(status)}\r\ndate: ${httpDate()}\r\n`;
    let length = false;
    // The handler may ask to close (as node:http takes `Connection: close` from it); the rest of the connection's headers are the front door's.
    let close = false;
    for (const k in headers) {
      const v = headers[k];
      if (v === undefined) continue;
      const name = k.toLowerCase();
      if (name === 'content-length') length = true;
      if (name === 'connection') close = closeToken.test(String(v));
      if (name === 'connection' || name === 'transfer-encoding' || name === 'keep-alive' || name === 'date')
        continue;
      if (Array.isArray(v)) for (const one of v) head += `${k}: ${String(one)}\r\n`;
      else head += `${k}: ${String(v)}\r\n`;
    }
    this.#bodyless = this.#headOnly || status === 204 || status === 304;
    this.#chunked = !length && !this.#bodyless;
    if (this.#chunked) head += 'transfer-encoding: chunked\r\n';
    this.#close = close || this.#owner.closesAfter();
    if (this.#close) head += 'connection: close\r\n';
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
        if (data !== undefined && data.length > 0)
          this.#send(`${data.length.toString(16)}\r\n`, data, '\r\n0\r\n\r\n');
        else this.#send('0\r\n\r\n', undefined, '');
      } else {
        this.#send('', data, '');
      }
    }
    this.#owner.answered(this);
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
