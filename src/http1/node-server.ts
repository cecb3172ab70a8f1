import {
  createServer,
  ServerResponse,
  type IncomingMessage,
  type OutgoingHttpHeader,
  type OutgoingHttpHeaders,
  type Server,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

import {
  clientErrorRefusal,
  closeAfterAnswer,
  lingerMs,
  refusalText,
  type ClientError,
  type Refusal,
  type RequestLimits,
} from './answers.js';
import { maxHeadBytes } from './heads.js';

/**
 * node:http's answer, which closes its connection when the handler answers without having
 * read the request's body (a refusal from the head: no key, no route): the body is not read
 * on to find the next request, so the connection cannot carry one, and the answer says so
 * (Connection: close) rather than promise keep-alive, and lingers on its close. The front
 * door's answers do the same.
 */
class Response extends ServerResponse {
  override writeHead(
    status: number,
    reason?: string | OutgoingHttpHeaders | OutgoingHttpHeader[],
    headers?: OutgoingHttpHeaders | OutgoingHttpHeader[],
  ): this {
    if (bodyUnread(this.req)) {
      this.shouldKeepAlive = false;
      // node:http closes such a connection at once, with the body's bytes unread, which sends
      // a reset that can reach the client before it reads this answer: close it as the front
      // door does, reading and dropping what still comes for a while.
      if (this.socket !== null) lingerOnClose(this.socket, this.req);
    }
    return super.writeHead(status, reason as string | undefined, headers);
  }
}

/**
 * node:http's close of a connection (destroySoon) made to wait: its side ended, the request's
 * body is read on and dropped by node:http's parser until it ends, the client closes, or
 * `lingerMs` passes.
 */
function lingerOnClose(socket: Socket, req: IncomingMessage): void {
  socket.destroySoon = () => {
    // A client gone meanwhile is no error of the server's.
    if (socket.listenerCount('error') === 0) socket.on('error', () => undefined);
    socket.end();
    const done = () => socket.destroy();
    const timer = setTimeout(done, lingerMs);
    timer.unref();
    if (req.readableEnded) done();
    req.once('end', done);
    socket.once('end', done);
    socket.once('close', () => clearTimeout(timer));
    req.resume();
  };
}

function bodyUnread(req: IncomingMessage): boolean {
  if (req.readableEnded) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

const noConnect: Refusal = {
  status: 400,
  code: 'bad_request',
  message:
    'CONNECT is not served: llmgw is no proxy; send requests to the API under /api/v1 or the gateway under /v1',
};

/**
 * node:http behind the front door, set to answer as it does: the same limits and words, a
 * request it cannot read or a CONNECT answered with a message rather than dropped.
 */
export function nodeServer(
  limits: RequestLimits,
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  const server = createServer(
    {
      keepAliveTimeout: 65_000,
      // The front door's limits, so that a request is answered alike whichever reads it.
      headersTimeout: limits.headMs,
      requestTimeout: limits.requestMs,
      // Timeouts are checked each second (node:http's default is 30 s).
      connectionsCheckingInterval: 1000,
      maxHeaderSize: maxHeadBytes,
      // Checked by the handler, to answer as the front door does.
      requireHostHeader: false,
      ServerResponse: Response,
    },
    onRequest,
  );
  // A request node:http cannot read: answered as node:http does, with a message.
  server.on('clientError', (e: ClientError, socket: Duplex) => {
    // After the answer, the parser may report the same error again; the first answered it.
    if (socket.writableEnded || socket.destroyed) return;
    const refusal = clientErrorRefusal(e, limits);
    const inFlight = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (refusal === undefined || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    closeAfterAnswer(socket, refusalText(refusal));
  });
  // CONNECT asks for a tunnel: node:http drops the connection unless someone answers it.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    closeAfterAnswer(socket, refusalText(noConnect));
  });
  return server;
}
