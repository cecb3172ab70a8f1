import { connect, type Socket } from 'node:net';

import { sleep } from './timing.js';

/** One answer as a client reads it off the wire. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A client on a raw socket: writes exact bytes (well-formed or not) and reads answers one
 * at a time, framed by Content-Length, or to the close; an answer to HEAD by its head alone.
 */
export class RawConnection {
  readonly socket: Socket;
  readonly closed: Promise<void>;
  isClosed = false;
  #buf = Buffer.alloc(0);
  #wake: (() => void) | undefined;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#wake?.();
    });
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.isClosed = true;
        this.#wake?.();
        resolve();
      }),
    );
  }

  static open(host: string, port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port }, () => {
        s.off('error', reject);
        resolve(new RawConnection(s));
      });
      s.once('error', reject);
    });
  }

  /** Writes `pieces` one after another, `pauseMs` apart. */
  async write(pieces: readonly (string | Buffer)[], pauseMs = 0): Promise<void> {
    for (const [i, p] of pieces.entries()) {
      if (i > 0 && pauseMs > 0) await sleep(pauseMs);
      if (this.isClosed) return;
      this.socket.write(typeof p === 'string' ? Buffer.from(p, 'latin1') : p);
    }
  }

  /** Bytes read and not taken as an answer. */
  get pending(): number {
    return this.#buf.length;
  }

  async answer(o: { head?: boolean; ms?: number } = {}): Promise<RawAnswer> {
    const ms = o.ms ?? 5000;
    const end = await this.#until(ms, () => {
      const i = this.#buf.indexOf('\r\n\r\n');
      return i < 0 ? undefined : i;
    });
    const lines = this.#buf.toString('latin1', 0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(lines[0] ?? '')?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    const start = end + 4;
    let stop = start;
    if (o.head !== true && status !== 204 && status !== 304) {
      const length = headers['content-length'];
      if (length !== undefined) stop = start + Number(length);
      else await this.#until(ms, () => (this.isClosed ? true : undefined));
      if (length === undefined) stop = this.#buf.length;
      else await this.#until(ms, () => (this.#buf.length >= stop ? true : undefined));
    }
    const body = this.#buf.toString('utf8', start, stop);
    this.#buf = this.#buf.subarray(stop);
    return { status, headers, body };
  }

  /** Whether the server closes the connection within `ms`. */
  async closesWithin(ms: number): Promise<boolean> {
    await Promise.race([this.closed, sleep(ms)]);
    return this.isClosed;
  }

  async #until<T>(ms: number, take: () => T | undefined): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = take();
      if (v !== undefined) return v;
      if (this.isClosed)
        throw new Error(
          `the connection closed; unread: ${JSON.stringify(this.#buf.toString('latin1').slice(0, 300))}`,
        );
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `no whole answer in ${ms} ms; read: ${JSON.stringify(this.#buf.toString('latin1').slice(0, 300))}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 50));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }
}

/** A request sent as a probe: its bytes, and what every path must answer it. */
export interface ProbeCase {
  name: string;
  pieces: (string | Buffer)[];
  pauseMs?: number;
  head?: boolean;
  /** The status; undefined where the part behind the HTTP layer decides it (it must still be the same either way). */
  status?: number;
  /** The error code of the body. */
  code?: string;
  closes: boolean;
}

/** What a probe got: the answer's status and code, and whether the connection closed after it. */
export interface ProbeResult {
  status: number;
  code: string | undefined;
  closes: boolean;
}

/**
 * The probe's requests against the front door: conflicting framing, heads it must not
 * take, heads over the limit however they arrive, bytes that are not HTTP, slow heads and
 * bodies, and a body a refusal leaves unread. `path` is served by the fast lane, `key` opens it.
 */
export function probeCases(o: { path: string; key: string }): ProbeCase[] {
  const auth = `Authorization: Bearer ${o.key}\r\n`;
  const post = (extra: string, body: string) =>
    `POST ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}${extra}\r\n${body}`;
  const big = 'b'.repeat(20_000);
  return [
    {
      name: 'Content-Length and Transfer-Encoding',
      pieces: [post('Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n')],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'two different Content-Lengths',
      pieces: [post('Content-Length: 2\r\nContent-Length: 3\r\n', '{}x')],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'the same Content-Length twice',
      pieces: [post('Content-Length: 2\r\nContent-Length: 2\r\n', '{}')],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'a bad chunk size',
      pieces: [post('Transfer-Encoding: chunked\r\n', 'zz\r\n{}\r\n0\r\n\r\n')],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'HEAD with a key',
      pieces: [`HEAD ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}\r\n`],
      head: true,
      closes: false,
    },
    {
      name: 'HEAD without a key',
      pieces: [`HEAD ${o.path} HTTP/1.1\r\nHost: t\r\n\r\n`],
      head: true,
      status: 401,
      closes: false,
    },
    {
      name: 'an unknown method',
      pieces: [`FOO ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}\r\n`],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'no Host',
      pieces: [`GET ${o.path} HTTP/1.1\r\n${auth}\r\n`],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'a head over 16 KiB in one write',
      pieces: [`GET ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}Accept: ${big}\r\n\r\n`],
      status: 431,
      code: 'request_header_fields_too_large',
      closes: true,
    },
    {
      name: 'a head over 16 KiB in pieces',
      pieces: [
        `GET ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}Accept: `,
        ...Array.from({ length: 20 }, () => 'b'.repeat(1000)),
      ],
      pauseMs: 5,
      status: 431,
      code: 'request_header_fields_too_large',
      closes: true,
    },
    {
      name: 'a bare LF',
      pieces: [`GET ${o.path} HTTP/1.1\nHost: t\n${auth.replace('\r', '')}\n`],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'TLS (a ClientHello)',
      pieces: [Buffer.from('16030100f5010000f1030312345678', 'hex')],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'a CR inside X-Request-Id',
      pieces: [`GET ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}X-Request-Id: a\rInjected: b\r\n\r\n`],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'a NUL inside a header value',
      pieces: [`GET ${o.path} HTTP/1.1\r\nHost: t\r\n${auth}Accept: a\u0000b\r\n\r\n`],
      status: 400,
      code: 'bad_request',
      closes: true,
    },
    {
      name: 'a slow head',
      pieces: [`GET ${o.path} HTTP/1.1\r\nHost: t\r\n`],
      status: 408,
      code: 'request_timeout',
      closes: true,
    },
    {
      name: 'a slow body',
      pieces: [post('Content-Length: 10\r\n', '{"a":')],
      status: 408,
      code: 'request_timeout',
      closes: true,
    },
    {
      name: 'a body left unread by a refusal (no key)',
      pieces: [
        `POST ${o.path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n${'x'.repeat(64 * 1024)}`,
      ],
      status: 401,
      code: 'invalid_api_key',
      closes: true,
    },
    // Refused from its head, the body not read: the connection closes, however much of the body came.
    {
      name: 'a whole small body without a key',
      pieces: [
        `POST ${o.path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ],
      status: 401,
      code: 'invalid_api_key',
      closes: true,
    },
    {
      name: 'a small body with a key, read',
      pieces: [post('Content-Type: application/json\r\nContent-Length: 2\r\n', '{}')],
      closes: false,
    },
  ];
}

/**
 * Sends a probe on a new connection, first on it or after `first` (a request node:http
 * answers: the connection is then node:http's), and says what came back.
 */
export async function probe(o: {
  host: string;
  port: number;
  c: ProbeCase;
  first?: string;
  closeWithinMs: number;
  next: string;
}): Promise<ProbeResult> {
  const conn = await RawConnection.open(o.host, o.port);
  try {
    if (o.first !== undefined) {
      await conn.write([o.first]);
      const a = await conn.answer();
      if (a.status !== 200) throw new Error(`the first request got ${a.status}: ${a.body}`);
    }
    await conn.write(o.c.pieces, o.c.pauseMs);
    const a = await conn.answer({ head: o.c.head === true, ms: 30_000 });
    let code: string | undefined;
    if (a.body !== '') code = (JSON.parse(a.body) as { error?: { code?: string } }).error?.code;
    if (await conn.closesWithin(o.c.closes ? o.closeWithinMs : 100))
      return { status: a.status, code, closes: true };
    // Still open: it must carry another request, with nothing left over from this one.
    if (conn.pending > 0) throw new Error('bytes after the answer');
    await conn.write([o.next]);
    const next = await conn.answer();
    if (next.status !== 200) throw new Error(`the request after got ${next.status}: ${next.body}`);
    return { status: a.status, code, closes: false };
  } finally {
    conn.socket.destroy();
  }
}
