import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

import { maxHeadBytes } from './heads.js';

/** The reason phrase of a status, from node:http's table. */
export function reasonOf(status: number): string {
  return STATUS_CODES[status] ?? 'Unknown';
}

let dateSecond = 0;
let dateText = '';
/** The Date header, made once a second. */
export function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/** A refusal by the HTTP layer itself, before any part behind it sees the request. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
  retryAfterS?: number;
}

/**
 * The whole answer to a refused request, written straight to its socket, which then closes.
 * The same bytes whichever of the front door or node:http meets the request; the body has
 * OpenAI's error shape, whose `error.code` and `error.message` the API's clients read too.
 */
export function refusalText(r: Refusal): string {
  const body = refusalBody(r);
  const retry = r.retryAfterS === undefined ? '' : `retry-after: ${r.retryAfterS}\r\n`;
  return `HTTP/1.1 ${r.status} ${reasonOf(r.status)}\r\ndate: ${httpDate()}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${retry}connection: close\r\n\r\n${body}`;
}

export function refusalBody(r: Refusal): string {
  return JSON.stringify({
    error: {
      message: r.message,
      type: r.status >= 500 ? 'service_unavailable' : 'invalid_request_error',
      param: null,
      code: r.code,
    },
  });
}

/** The time limits a request's head and the whole request are held to. */
export interface RequestLimits {
  headMs: number;
  requestMs: number;
}

const seconds = (ms: number): string => `${ms / 1000} s`;

export const headTooLarge: Refusal = {
  status: 431,
  code: 'request_header_fields_too_large',
  message: `the request head is over ${maxHeadBytes / 1024} KiB: send fewer or shorter headers (a long value belongs in the body)`,
};

/** A head, or a whole request, that did not come in time (node:http does not say which). */
export function tooSlow(limits: RequestLimits): Refusal {
  return {
    status: 408,
    code: 'request_timeout',
    message: `the request did not come whole in time (its head is awaited ${seconds(limits.headMs)}, all of it ${seconds(limits.requestMs)}): send each request without pausing`,
  };
}

export const noHost: Refusal = {
  status: 400,
  code: 'bad_request',
  message:
    'the request has no Host header, which HTTP/1.1 requires (RFC 9112, 3.2): send one, e.g. "Host: 127.0.0.1:8080"',
};

export function tooManyConnections(address: string, max: number): Refusal {
  return {
    status: 503,
    code: 'too_many_connections',
    message: `${address} has ${max} connections open here, the most one address may (gateway.max_connections_per_client): reuse connections (keep-alive) or close some before opening more`,
    retryAfterS: 1,
  };
}

/**
 * A protocol upgrade (`Connection: upgrade`) asked of a path that takes none; `served`: the
 * paths that take one. node:http hands every such request to the upgrade handlers, so this
 * is also the answer to a plain request that merely offers one (curl --http2 on http://).
 */
export function noUpgrade(path: string, served: readonly string[]): Refusal {
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  const which =
    served.length === 0
      ? 'this server takes none'
      : `only ${served.join(', ')} ${served.length === 1 ? 'takes' : 'take'} one`;
  return {
    status: 404,
    code: 'not_found',
    message: `no protocol upgrade is served at ${shown}: ${which}; send other requests without the "Upgrade" and "Connection: upgrade" headers (curl adds them for --http2 on an http:// URL)`,
  };
}

/** A client error as node:http reports it ('clientError'). */
export interface ClientError {
  code?: string | undefined;
  reason?: string | undefined;
  rawPacket?: Buffer | undefined;
}

/** TLS records start with 0x16 (handshake) and a 3.x version. */
const looksLikeTls = (bytes: Buffer | undefined): boolean =>
  bytes !== undefined && bytes[0] === 0x16 && bytes[1] === 0x03;

/**
 * node:http's answer to a request it cannot read, as node:http's own default has it (400,
 * 431, 408) but with a message; undefined when the client is gone and nothing is answered.
 */
export function clientErrorRefusal(e: ClientError, limits: RequestLimits): Refusal | undefined {
  switch (e.code) {
    case 'ECONNRESET':
    case 'EPIPE':
      return undefined;
    case 'HPE_HEADER_OVERFLOW':
      return headTooLarge;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return tooSlow(limits);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return {
        status: 413,
        code: 'request_too_large',
        message: 'the chunk extensions of the request body are too long: send the body without them',
      };
    default:
      if (looksLikeTls(e.rawPacket))
        return {
          status: 400,
          code: 'bad_request',
          message: 'this port speaks plain HTTP, not TLS: use an http:// address',
        };
      return {
        status: 400,
        code: 'bad_request',
        message: `the request is not HTTP/1.1 as this server reads it (${e.reason ?? e.code ?? 'malformed'}): send "METHOD /path HTTP/1.1", header lines ended by CRLF, a Host header and one framing of the body (Content-Length or chunked)`,
      };
  }
}

/** How long a closing connection is still read, so that its client reads the answer rather than a reset. */
export const lingerMs = 2000;

/**
 * Writes a connection's last answer and ends it. What the client still sends (the body of a
 * refused request) is read and dropped, nothing kept, until it closes its side or
 * `lingerMs` passes: closing with bytes unread would send a reset, which can cost the
 * client the answer it has not read yet.
 */
export function closeAfterAnswer(socket: Duplex, answer?: string): void {
  // A client gone meanwhile is no error of the server's.
  if (socket.listenerCount('error') === 0) socket.on('error', drop);
  if (answer !== undefined) socket.write(answer, 'latin1');
  socket.removeAllListeners('data');
  socket.on('data', drop);
  socket.resume();
  socket.end();
  const timer = setTimeout(() => socket.destroy(), lingerMs);
  timer.unref();
  socket.once('end', () => socket.destroy());
  socket.once('close', () => clearTimeout(timer));
}

function drop(): void {
  // Bytes of a connection that is closing, or its error: the client is let go either way.
}
