import { connect, isIP, type Socket } from 'node:net';
import { connect as connectTls, type SecureContextOptions } from 'node:tls';

import { ChunkedDecoder } from './chunked-decoder.js';
import { headEnd, maxHeadBytes, parseResponseHead, requestHeadProblem, type ResponseHead } from './heads.js';

/** What one exchange with the upstream reports, in this order: head, data (any number), then end or error. */
export interface UpstreamHandler {
  onHead(status: number, headers: Record<string, string>): void;
  onData(piece: Buffer): void;
  onEnd(): void;
  /** The exchange failed; `answered` says whether the response's head had come. Nothing follows. */
  onError(error: Error, answered: boolean): void;
}

export interface UpstreamRequest {
  method: string;
  /** Origin-form target: `/v1/chat/completions`. */
  path: string;
  /**
   * Lower-case names; values of printable characters (and tabs) up to U+00FF, sent as
   * Latin-1. A request with any other is not sent: it fails. Host and Content-Length are added.
   */
  headers: Record<string, string>;
  body: Buffer | string;
}

export interface UpstreamCall {
  /** Drops the exchange and its connection (the engine sees the close and stops the work). */
  abort(): void;
  pause(): void;
  resume(): void;
}

export interface UpstreamPoolOptions {
  /** Idle connections are closed after this, or the server's `Keep-Alive: timeout` less a second. */
  idleMs?: number;
  connectTimeoutMs?: number;
  /**
   * For an `https://` upstream: the CA (PEM) its certificate must chain to, such as the
   * cluster's; unset, the system's CAs.
   */
  ca?: string | undefined;
}

/**
 * Keep-alive HTTP/1.1 connections to one upstream (an engine, or a node's engine proxy over
 * TLS), one exchange on a connection at a time. It is the gateway's client: no request object, stream or timer
 * per exchange, the request written in one call, the answer's body passed on as the
 * slices the socket read. A connection reused after idling that fails before any answer
 * byte (the server closed it as the request went out) is retried once on a new one.
 */
export class UpstreamPool {
  readonly #host: string;
  readonly #port: number;
  readonly #hostHeader: string;
  /** The endpoint's path (`/r/<replica>` behind an engine proxy), put before each request's. */
  readonly #prefix: string;
  /** For https: how to verify the upstream; its last session, resumed by the next connection. */
  readonly #tls: TlsTarget | undefined;
  #session: Buffer | undefined;
  readonly #idleMs: number;
  readonly #connectTimeoutMs: number;
  readonly #idle: Conn[] = [];
  readonly #busy = new Set<Conn>();
  readonly #sweeper: NodeJS.Timeout;
  #closed = false;

  constructor(endpoint: string, options: UpstreamPoolOptions = {}) {
    const url = new URL(endpoint);
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new Error(`${endpoint}: an upstream is http:// or https://`);
    if (url.search !== '' || url.hash !== '' || url.username !== '')
      throw new Error(`${endpoint}: an upstream is a scheme, host, port and path, with no query or user`);
    const secure = url.protocol === 'https:';
    this.#host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.#port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    this.#hostHeader = url.host;
    this.#prefix = url.pathname.replace(/\/+$/, '');
    // SNI names a host, never an address (RFC 6066, 3); an address is checked against the certificate's IP names.
    this.#tls = secure
      ? { ca: options.ca, servername: isIP(this.#host) === 0 ? this.#host : undefined }
      : undefined;
    this.#idleMs = options.idleMs ?? 4000;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.#sweeper = setInterval(() => this.#sweep(), 1000);
    this.#sweeper.unref();
  }

  /** Connections open now: busy, idle. */
  get connections(): { busy: number; idle: number } {
    return { busy: this.#busy.size, idle: this.#idle.length };
  }

  request(req: UpstreamRequest, handler: UpstreamHandler): UpstreamCall {
    const path = this.#prefix + req.path;
    let head = `${req.method} ${path} HTTP/1.1\r\nhost: ${this.#hostHeader}\r\ncontent-length: ${Buffer.byteLength(req.body)}\r\n`;
    for (const k in req.headers) head += `${k}: ${req.headers[k] as string}\r\n`;
    head += '\r\n';
    const x = new Exchange(this, { method: req.method, head, body: req.body }, handler);
    // Nothing the engine would read otherwise than as meant is written (RFC 9110, 5.5).
    const problem = requestHeadProblem(req.method, path, req.headers);
    if (problem !== undefined || this.#closed) {
      const error = new Error(
        problem === undefined
          ? 'the connection pool is closed'
          : `not sent to ${this.#hostHeader}: ${problem}`,
      );
      queueMicrotask(() => x.fail(error, false));
      return x;
    }
    x.start(this.#take());
    return x;
  }

  /** Closes idle connections now and the others as their exchanges end. */
  close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    for (const c of this.#idle.splice(0)) c.socket.destroy();
    if (this.#busy.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const check = setInterval(() => {
        if (this.#busy.size > 0) return;
        clearInterval(check);
        resolve();
      }, 50);
      check.unref();
    });
  }

  /** @internal A connection for an exchange: the most recently idle one (warm), else a new one. */
  take(fresh: boolean): Conn {
    return fresh ? this.#open() : this.#take();
  }

  #take(): Conn {
    const c = this.#idle.pop();
    if (c === undefined) return this.#open();
    c.reused = true;
    this.#busy.add(c);
    return c;
  }

  #open(): Conn {
    const t = this.#tls;
    const socket =
      t === undefined ? connect({ host: this.#host, port: this.#port, noDelay: true }) : this.#openTls(t);
    const c = new Conn(socket, this);
    socket.setTimeout(this.#connectTimeoutMs);
    // Written before the handshake ends, the request waits in the socket until it has.
    socket.once(t === undefined ? 'connect' : 'secureConnect', () => socket.setTimeout(0));
    socket.on('timeout', () =>
      socket.destroy(new Error(`no connection to ${this.#hostHeader} within ${this.#connectTimeoutMs} ms`)),
    );
    this.#busy.add(c);
    return c;
  }

  #openTls(t: TlsTarget): Socket {
    const socket = connectTls({
      // The TCP socket made here, so that it is made without Nagle's delay (a request's
      // head and body, written apart, would otherwise wait on the server's delayed ACK).
      socket: connect({ host: this.#host, port: this.#port, noDelay: true }),
      host: this.#host,
      port: this.#port,
      ALPNProtocols: ['http/1.1'],
      ...(t.ca === undefined ? {} : { ca: t.ca }),
      ...(t.servername === undefined ? {} : { servername: t.servername }),
      // A resumed session skips the certificate exchange: a new connection costs one round trip.
      ...(this.#session === undefined ? {} : { session: this.#session }),
    });
    socket.on('session', (session: Buffer) => (this.#session = session));
    // Said before the connection's other listeners read it.
    socket.prependListener('error', (e: Error & { code?: string }) => {
      const why = certificateProblem(e.code, t.ca !== undefined);
      if (why !== undefined) e.message = `${this.#hostHeader}: ${why} (${e.message})`;
    });
    return socket;
  }

  /** @internal The exchange on `c` ended and left it fit for another. */
  release(c: Conn, keepAliveHintMs: number | undefined): void {
    this.#busy.delete(c);
    if (this.#closed) {
      c.socket.destroy();
      return;
    }
    c.idleSince = performance.now();
    c.idleLimitMs =
      keepAliveHintMs === undefined
        ? this.#idleMs
        : Math.min(this.#idleMs, Math.max(0, keepAliveHintMs - 1000));
    this.#idle.push(c);
  }

  /** @internal The connection is gone. */
  forget(c: Conn): void {
    this.#busy.delete(c);
    const i = this.#idle.indexOf(c);
    if (i >= 0) this.#idle.splice(i, 1);
  }

  #sweep(): void {
    const now = performance.now();
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const c = this.#idle[i] as Conn;
      if (now - c.idleSince >= c.idleLimitMs) {
        this.#idle.splice(i, 1);
        c.socket.destroy();
      }
    }
  }
}

interface TlsTarget {
  ca: SecureContextOptions['ca'];
  servername: string | undefined;
}

/** What a TLS failure to verify an upstream means, for the one who reads the gateway's log. */
export function certificateProblem(code: string | undefined, clusterCa: boolean): string | undefined {
  const ca = clusterCa ? 'the cluster CA' : "the system's CAs";
  switch (code) {
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_SIGNATURE_FAILURE':
      return `its certificate does not chain to ${ca}: refused; give the node a certificate the cluster CA issued`;
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return 'its certificate does not name this address: refused; the node needs a certificate issued for the address the gateway dials';
    case 'CERT_HAS_EXPIRED':
    case 'CERT_NOT_YET_VALID':
      return 'its certificate is outside its validity period: refused; the node needs a renewed certificate';
    default:
      return undefined;
  }
}

/** @internal One socket to the upstream and the exchange it carries now, if any. */
class Conn {
  readonly socket: Socket;
  current: Exchange | undefined;
  reused = false;
  idleSince = 0;
  idleLimitMs = 0;

  constructor(socket: Socket, pool: UpstreamPool) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      if (this.current === undefined) {
        // Bytes nobody asked for: the connection can no longer be trusted.
        socket.destroy();
        return;
      }
      this.current.feed(d);
    });
    let failure: Error | undefined;
    // Reported by 'close', which always follows.
    socket.on('error', (e) => {
      failure = e;
    });
    socket.on('close', () => {
      pool.forget(this);
      const x = this.current;
      this.current = undefined;
      x?.closed(failure);
    });
  }
}

/** @internal One request and its answer. */
class Exchange implements UpstreamCall {
  readonly #pool: UpstreamPool;
  readonly #method: string;
  readonly #head: string;
  readonly #body: Buffer | string;
  readonly #h: UpstreamHandler;
  #conn: Conn | undefined;
  #state: 'head' | 'body' | 'over' = 'head';
  #headBytes: Buffer | undefined;
  #response: ResponseHead | undefined;
  #left = 0;
  #chunks: ChunkedDecoder | undefined;
  #gotBytes = false;
  #retried = false;
  #paused = false;

  constructor(
    pool: UpstreamPool,
    request: { method: string; head: string; body: Buffer | string },
    handler: UpstreamHandler,
  ) {
    this.#pool = pool;
    this.#method = request.method;
    this.#head = request.head;
    this.#body = request.body;
    this.#h = handler;
  }

  /** Whether the handler ended the exchange (it may abort from any callback). */
  get #over(): boolean {
    return this.#state === 'over';
  }

  start(conn: Conn): void {
    this.#conn = conn;
    conn.current = this;
    const s = conn.socket;
    if (typeof this.#body === 'string' && Buffer.byteLength(this.#head) === this.#head.length) {
      s.write(this.#head + this.#body);
    } else if (typeof this.#body === 'string') {
      // A head with values past 0x7F: Latin-1, as it was read, and the body UTF-8.
      s.write(Buffer.concat([Buffer.from(this.#head, 'latin1'), Buffer.from(this.#body)]));
    } else if (this.#body.length < 16 * 1024) {
      s.write(Buffer.concat([Buffer.from(this.#head, 'latin1'), this.#body]));
    } else {
      s.cork();
      s.write(this.#head, 'latin1');
      s.write(this.#body);
      s.uncork();
    }
  }

  abort(): void {
    if (this.#state === 'over') return;
    this.#state = 'over';
    const c = this.#conn;
    if (c !== undefined) {
      c.current = undefined;
      c.socket.destroy();
    }
  }

  // Only while this exchange holds its connection: once it ended, the connection may
  // carry another's answer (a late 'drain' from the client must not touch it).
  pause(): void {
    if (this.#state === 'over') return;
    this.#paused = true;
    this.#conn?.socket.pause();
  }

  resume(): void {
    if (this.#state === 'over') return;
    this.#paused = false;
    this.#conn?.socket.resume();
  }

  feed(d: Buffer): void {
    this.#gotBytes = true;
    if (this.#state === 'head') {
      const bytes = this.#headBytes === undefined ? d : Buffer.concat([this.#headBytes, d]);
      const end = bytes.indexOf(headEnd);
      if (end < 0) {
        if (bytes.length > maxHeadBytes) this.#broken("the answer's head is over 16 KiB");
        else this.#headBytes = bytes;
        return;
      }
      this.#headBytes = undefined;
      const head = parseResponseHead(bytes.toString('latin1', 0, end), this.#method);
      if (head === undefined) {
        this.#broken('the answer is not well-formed HTTP/1.1');
        return;
      }
      const rest = bytes.subarray(end + 4);
      if (head.status < 200) {
        // An interim answer (100 Continue): the real one follows.
        if (rest.length > 0) this.feed(rest);
        return;
      }
      this.#response = head;
      this.#state = 'body';
      if (head.framing.kind === 'length') this.#left = head.framing.length;
      if (head.framing.kind === 'chunked') this.#chunks = new ChunkedDecoder();
      this.#h.onHead(head.status, head.headers);
      if (this.#over) return;
      if (head.framing.kind === 'none' || (head.framing.kind === 'length' && this.#left === 0)) {
        this.#finish(rest.length === 0);
        return;
      }
      if (rest.length > 0) this.#body_(rest);
      return;
    }
    if (this.#state === 'body') this.#body_(d);
  }

  #body_(d: Buffer): void {
    const framing = (this.#response as ResponseHead).framing;
    if (framing.kind === 'length') {
      const take = Math.min(this.#left, d.length);
      this.#left -= take;
      this.#h.onData(take === d.length ? d : d.subarray(0, take));
      if (this.#state === 'body' && this.#left === 0) this.#finish(take === d.length);
      return;
    }
    if (framing.kind === 'chunked') {
      const decoder = this.#chunks as ChunkedDecoder;
      let used: number;
      try {
        used = decoder.push(d, (piece) => {
          if (this.#state === 'body') this.#h.onData(piece);
        });
      } catch (e) {
        this.#broken(`the answer's chunked framing is broken: ${(e as Error).message}`);
        return;
      }
      if (this.#state === 'body' && decoder.done) this.#finish(used === d.length);
      return;
    }
    // Ends with the connection.
    this.#h.onData(d);
  }

  /** The answer is whole; the connection goes back when nothing followed it and both sides keep it. */
  #finish(clean: boolean): void {
    this.#state = 'over';
    const c = this.#conn as Conn;
    c.current = undefined;
    const head = this.#response as ResponseHead;
    if (clean && head.reusable) {
      if (this.#paused) c.socket.resume();
      this.#pool.release(c, keepAliveHint(head.headers['keep-alive']));
    } else {
      c.socket.destroy();
    }
    this.#h.onEnd();
  }

  #broken(why: string): void {
    const answered = this.#response !== undefined;
    this.abort();
    this.#h.onError(new Error(why), answered);
  }

  /** @internal The socket closed under this exchange. */
  closed(failure: Error | undefined): void {
    if (this.#state === 'over') return;
    if (this.#state === 'body' && this.#response?.framing.kind === 'close' && failure === undefined) {
      this.#state = 'over';
      this.#h.onEnd();
      return;
    }
    // The server closed a kept connection just as this request went out: nothing was
    // processed, so it goes once more on a new connection.
    if (this.#conn?.reused === true && !this.#gotBytes && !this.#retried) {
      this.#retried = true;
      this.start(this.#pool.take(true));
      return;
    }
    this.fail(
      failure ?? new Error('the connection closed before the answer ended'),
      this.#response !== undefined,
    );
  }

  /** @internal */
  fail(error: Error, answered: boolean): void {
    if (this.#state === 'over') return;
    this.#state = 'over';
    this.#h.onError(error, answered);
  }
}

function keepAliveHint(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const m = /timeout=(\d+)/i.exec(value);
  return m === null ? undefined : Number(m[1]) * 1000;
}
