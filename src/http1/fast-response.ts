import type { Socket } from 'node:net';

import { httpDate, reasonOf } from './answers.js';

/** @internal What an answer tells the connection it is written on. */
export interface ResponseOwner {
  /** Whether an answer whose head is written now is the connection's last. */
  closesAfter(): boolean;
  /** The answer is written whole. */
  answered(res: FastResponse): void;
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
