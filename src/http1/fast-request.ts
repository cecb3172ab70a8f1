import type { RequestHead } from './heads.js';

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

/** @internal What a request asks of its connection: read on, the handler wants the body. */
export interface BodyReader {
  wantBody(): void;
}

/** @internal A fast request's body as its connection reads it: whole with the head, or when the handler asks. */
export class ReadRequest implements FastRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The handler asked for the body. */
  wanted = false;
  readonly #length: number;
  readonly #conn: BodyReader;
  #body: Buffer | undefined;
  #failure: RequestAbortedError | undefined;
  #waiting: Promise<Buffer> | undefined;
  #resolve: ((body: Buffer) => void) | undefined;
  #reject: ((e: Error) => void) | undefined;

  constructor(head: RequestHead, body: Buffer | undefined, conn: BodyReader) {
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
