import type { GatewayRequest } from '../http1/client-io.js';
import { requestIdFrom } from '../core/request-id.js';

import type { GatewayPrincipal } from './keys.js';
import type { TokenCounts } from './usage-scan.js';
import type { WaitingStream } from './waiting-stream.js';

/** One request as the gateway follows it, from its head to its log line. */
export interface Exchange {
  requestId: string;
  /** Stops what the request is doing now (waiting in the queue, or the engine's answer): the client went away. */
  cancel?: (() => void) | undefined;
  started: number;
  principal?: GatewayPrincipal;
  /** The model as asked for (`MODEL` or `MODEL:ADAPTER`), once its length is checked. */
  model?: string;
  /** The catalog model: the part before any `:`. */
  base?: string;
  replica?: string;
  status?: number;
  retries: number;
  queuedMs: number;
  ttftMs?: number;
  usage?: TokenCounts;
  stream?: boolean;
  error?: string;
  /** When it entered the waiting room (its model was at zero): its cold start runs from here. */
  roomAt?: number;
  /** Where its answer goes when not straight to the client: a stream opened while it waited. */
  out?: WaitingStream;
}

/** A request just come: its id (the client's X-Request-Id, else a new one) and its start. */
export function newExchange(req: GatewayRequest): Exchange {
  return {
    requestId: requestIdFrom(req.headers['x-request-id']),
    started: performance.now(),
    retries: 0,
    queuedMs: 0,
  };
}

/** The request's path, without its query. */
export function pathOf(req: GatewayRequest): string {
  return (req.url ?? '/').split('?')[0] ?? '/';
}
