import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';

import type { Logger } from 'pino';

import { hopByHop } from '../../http1/hop-by-hop.js';
import { formatPreamble } from '../../http1/relay-preamble.js';

/**
 * What a gateway worker does not serve goes to its primary over the relay socket, on a
 * connection of its own led by the client's address: requests of other parts, and upgrades.
 */

function clientOf(socket: Socket): { address: string; tls: boolean } {
  return {
    address: socket.remoteAddress ?? '0.0.0.0',
    tls: (socket as Socket & { encrypted?: boolean }).encrypted === true,
  };
}

/** A connection to the primary's relay socket, led by the client's address. */
function relayConnection(relayPath: string, client: Socket): Socket {
  const s = connect(relayPath);
  s.write(formatPreamble(clientOf(client)));
  return s;
}

/**
 * An upgrade (the agents' WebSocket channel): the request is written to the primary as it came,
 * and the connection becomes a byte pipe both ways.
 */
export function pipeUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  o: { relayPath: string; logger: Logger; piped: Set<Duplex> },
): void {
  const { logger, piped } = o;
  const up = relayConnection(o.relayPath, req.socket);
  piped.add(socket);
  socket.once('close', () => piped.delete(socket));
  let text = `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}\r\n`;
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
    text += `${req.rawHeaders[i] ?? ''}: ${req.rawHeaders[i + 1] ?? ''}\r\n`;
  up.write(`${text}\r\n`, 'latin1');
  if (head.length > 0) up.write(head);
  socket.pipe(up);
  up.pipe(socket);
  const fail = (e?: NodeJS.ErrnoException) => {
    const code = e?.code;
    if (e !== undefined && code !== 'ECONNRESET' && code !== 'EPIPE')
      logger.warn({ err: e.message }, 'relay to the primary failed');
    up.destroy();
    socket.destroy();
  };
  up.on('error', fail);
  socket.on('error', () => fail());
  up.on('close', () => socket.destroy());
  socket.on('close', () => up.destroy());
}

export function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!hopByHop.has(k)) out[k] = v;
  return out;
}

/**
 * A request of another part (the API, the console, an event stream): sent to the primary as an
 * HTTP request of its own, on a connection of its own led by the client's address, and the
 * answer streamed back. Per request rather than per connection, so that every /v1 request,
 * whatever came before it on its connection, is served by a worker.
 */
export function proxyToPrimary(relayPath: string): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const up = httpRequest(
      {
        method: req.method,
        path: req.url,
        headers: endToEnd(req.headers),
        // No agent: a connection per request, carrying this client's address, never another's.
        createConnection: () => relayConnection(relayPath, req.socket),
      },
      (answer) => {
        // The primary's connection is this request's alone: whether the client's stays open is
        // for this worker's node:http to say, as for any answer of its own.
        res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
        answer.pipe(res);
      },
    );
    // The client gone: so is its request to the primary (an event stream never ends by itself).
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    // The primary gone (stopping, or killed: this worker follows it at once): the client sees
    // the connection cut, as from a server that died, not an answer: a write it sent may have
    // been done, and only a cut says so.
    up.on('error', () => {
      res.destroy();
    });
    req.pipe(up);
  };
}
