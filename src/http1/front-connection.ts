import type { Socket } from 'node:net';

import { closeAfterAnswer, refusalText, tooSlow, type RequestLimits } from './answers.js';
import type { FastLane } from './fast-lane.js';
import { ReadRequest, type BodyReader } from './fast-request.js';
import { FastResponse, type ResponseOwner } from './fast-response.js';
import { headEnd, mayBeHead, maxHeadBytes, parseRequestHead, type RequestHead } from './heads.js';

/**
 * Bytes read ahead of need: of requests sent ahead (pipelined) while one is answered, or of
 * a body its handler has not asked for yet. Past it, the client is not read.
 */
const maxAheadBytes = 64 * 1024;

/** @internal What a connection asks of the front door that reads it. */
export interface Door {
  readonly limits: RequestLimits;
  readonly keepAliveMs: number;
  readonly closing: boolean;
  laneFor(url: string): FastLane | undefined;
  /** node:http takes the connection, with the bytes already read. */
  handOff(c: FrontConnection, read: Buffer | undefined): void;
  /** The connection is no longer the door's (closed, or dropped). */
  forget(c: FrontConnection): void;
}

/** @internal One client connection while the front door reads it. */
export class FrontConnection implements ResponseOwner, BodyReader {
  readonly socket: Socket;
  readonly #door: Door;
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

  constructor(socket: Socket, door: Door) {
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
