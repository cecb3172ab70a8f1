import type { ClientResponse, GatewayRequest } from '../http1/client-io.js';
import { hopByHop } from '../http1/hop-by-hop.js';
import type { UpstreamCall, UpstreamPool } from '../http1/upstream-pool.js';

import type { GatewayMetrics } from './gateway-metrics.js';
import type { GatewayPrincipal } from './keys.js';
import type { IdleWatch, Watched } from './idle-watch.js';
import {
  engineError,
  engineRefusal,
  GatewayError,
  sendEngineError,
  sendError,
  sseError,
} from './openai-errors.js';
import type { ReplicaHealth } from './replica-health.js';
import type { Lease, Outcome } from './router/types.js';
import { SseRelay } from './sse-relay.js';
import { scanUsage, type TokenCounts } from './usage-scan.js';
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

/** What an attempt needs of its gateway. */
export interface ForwardContext {
  pool(endpoint: string): UpstreamPool;
  idle: IdleWatch;
  metrics: GatewayMetrics;
  health: ReplicaHealth;
  /** Counts an answered request: usage, the key's tokens, metrics. */
  account(x: Exchange): void;
  /** The request's log line and its status in the metrics. */
  log(x: Exchange, status: number): void;
}

export interface Attempt {
  req: GatewayRequest;
  res: ClientResponse;
  x: Exchange;
  lease: Lease;
  path: string;
  payload: string | Buffer;
  stripUsage: boolean;
}

/** Most of an engine's error body read (its message is what the client needs). */
const errorBodyMax = 64 * 1024;

/**
 * One attempt on one replica. 'retry' when it refused the connection, failed (401: our key
 * for it is wrong; a 5xx while its health check fails too) before any byte reached the
 * client. An engine's 4xx, its 501 for what it was not started to do, and a 5xx while it
 * answers its health check (the request was what it could not take: `"tools": 5`, an image
 * for a text model) are the client's answer in OpenAI's shape, never tried elsewhere, and no
 * mark against the replica: one client's requests never take a replica out of rotation.
 */
export function forward(g: ForwardContext, o: Attempt): Promise<'done' | 'retry'> {
  const { req, res, x, lease } = o;
  const r = lease.replica;
  const model = x.model ?? r.model;
  return new Promise((resolve) => {
    let settled = false;
    /** The engine refused or failed (4xx, 5xx) before any byte went out: its body, read for its words. */
    let refusal: { status: number; parts: Buffer[]; size: number } | undefined;
    let relay: SseRelay | undefined;
    /**
     * A plain answer's head, written with its first bytes: until then nothing reached the
     * client, so an engine that fails or stalls after its head is still retried or answered 504.
     */
    let head: { status: number; headers: Record<string, string> } | undefined;
    const flushHead = () => {
      if (head === undefined) return;
      res.writeHead(head.status, head.headers);
      head = undefined;
    };
    let tail = '';
    // The last chunk of a plain answer is held back until the next one comes, or the
    // answer ends: a small answer (one chunk, the usual case) then goes out in one write
    // with the end of the response, instead of two.
    let held: Buffer | undefined;
    const watched: Watched = { lastAt: performance.now(), paused: false, onIdle: () => stalled() };
    const settle = (outcome: Outcome, result: 'done' | 'retry', status?: number) => {
      if (settled) return;
      settled = true;
      g.idle.delete(watched);
      x.cancel = undefined;
      lease.release(outcome, x.principal?.name);
      if (status !== undefined) g.log(x, status);
      resolve(result);
    };
    /** The engine's refusal, as the client gets it: `as` the status it goes out with. */
    const answerRefusal = (error: ReturnType<typeof engineError>, status: number, outcome: Outcome) => {
      sendEngineError(res, { status, error, requestId: x.requestId, replica: r.id });
      x.status = status;
      g.metrics.refused(x.model, x.principal?.name, 'engine_refused');
      g.account(x);
      settle(outcome, 'done', status);
    };
    /** A 5xx before any byte: the replica's own health says whose failure it was. */
    const judge = (status: number, body: string) => {
      const words = engineError(status, body).message;
      x.error = `${r.id} answered ${status}: ${words}`;
      g.idle.delete(watched);
      x.cancel = () => settle('cancelled', 'done', 499);
      void g.health.healthy(r).then((healthy) => {
        if (settled) return;
        if (healthy) answerRefusal(engineRefusal(status, body), 400, 'refused');
        else settle('failed', 'retry');
      });
    };
    const accept = req.headers['accept'];
    const call: UpstreamCall = g.pool(r.endpoint).request(
      {
        method: 'POST',
        path: o.path,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${r.apiKey}`,
          accept: typeof accept === 'string' ? accept : '*/*',
          'x-request-id': x.requestId,
        },
        body: o.payload,
      },
      {
        onHead: (status, headers) => {
          watched.lastAt = performance.now();
          if (!res.headersSent && status >= 400) {
            refusal = { status, parts: [], size: 0 };
            return;
          }
          const sse = (headers['content-type'] ?? '').startsWith('text/event-stream');
          const out = passedHeaders(headers, sse);
          out['x-request-id'] = x.requestId;
          // Which replica answered: for people reading a trace, and for tests of routing.
          out['x-llmgw-replica'] = r.id;
          if (sse) {
            const itl = g.metrics.itlFor(model);
            relay = new SseRelay({
              stripUsage: o.stripUsage,
              onToken: (gap) => {
                if (gap !== undefined) itl.observe(gap / 1000);
              },
            });
          }
          if (sse) res.writeHead(status, out);
          else head = { status, headers: out };
          x.status = status;
        },
        onData: (chunk) => {
          watched.lastAt = performance.now();
          if (settled) return;
          if (refusal !== undefined) {
            if (refusal.size < errorBodyMax) refusal.parts.push(chunk);
            refusal.size += chunk.length;
            return;
          }
          let ok: boolean;
          if (relay !== undefined) {
            const out = relay.push(chunk);
            ok = out === undefined || res.write(out);
          } else {
            ok = true;
            if (held !== undefined) {
              flushHead();
              ok = res.write(held);
            }
            held = chunk;
            // Usage is at the end of a JSON answer: keep the end to read it.
            tail =
              tail.length + chunk.length > 8192
                ? (tail + chunk.toString('latin1')).slice(-4096)
                : tail + chunk.toString('latin1');
          }
          if (!ok) {
            call.pause();
            watched.paused = true;
            res.once('drain', () => {
              watched.paused = false;
              call.resume();
            });
          }
        },
        onEnd: () => {
          if (settled) return;
          if (refusal !== undefined) {
            const { status } = refusal;
            const body = Buffer.concat(refusal.parts).subarray(0, errorBodyMax).toString('utf8');
            if (status === 401) {
              x.error = `${r.id} answered 401 (it refused the gateway’s key for it: restart the replica)`;
              settle('failed', 'retry');
            } else if (status >= 500 && status !== 501) {
              judge(status, body);
            } else {
              const error = engineError(status, body);
              x.error = `${r.id} answered ${status}: ${error.message}`;
              // The replica answered: as good a sign of its health as a 200.
              answerRefusal(error, status, 'ok');
            }
            return;
          }
          const status = x.status ?? 200;
          if (relay !== undefined) {
            const rest = relay.end();
            if (rest === undefined) res.end();
            else res.end(rest);
            x.usage = relay.usage;
            if (relay.firstTokenAt !== undefined) x.ttftMs = relay.firstTokenAt - x.started;
          } else {
            flushHead();
            if (held === undefined) res.end();
            else res.end(held);
            held = undefined;
            if (status < 400) x.usage = scanUsage(tail);
          }
          g.account(x);
          settle('ok', 'done', status);
        },
        onError: (e) => {
          if (settled) return;
          x.error = `${r.id}: ${e.message}`;
          if (!res.headersSent) {
            settle('failed', 'retry');
            return;
          }
          // Bytes already reached the client: never sent twice; the client sees the cut.
          res.destroy();
          settle('failed', 'done', 502);
        },
      },
    );
    x.cancel = () => {
      call.abort();
      settle('cancelled', 'done', 499);
    };
    // The engine went silent: the client is told so (not retried: the wait was spent, and a
    // stalled engine's work may still be running), and the replica leaves rotation until a
    // request to it is answered again.
    const stalled = () => {
      if (settled) return;
      call.abort();
      const seconds = Math.round(g.idle.idleMs / 100) / 10;
      const error = new GatewayError(
        'upstream_timeout',
        `replica ${r.id} of ${r.model} sent nothing for ${seconds} s (gateway.upstream_idle_timeout_s); it is taken out of rotation until it answers again: send the request again`,
      );
      x.error = error.message;
      g.metrics.refused(x.model, x.principal?.name, error.code);
      if (!res.headersSent) {
        sendError(res, error, x.requestId);
        settle('stalled', 'done', error.status);
        return;
      }
      if (relay !== undefined) {
        // A stream already open ends with an error event, as OpenAI's streams carry one.
        res.end(sseError(error));
        g.account(x);
      } else {
        res.destroy();
      }
      settle('stalled', 'done', x.status ?? 200);
    };
    g.idle.add(watched);
  });
}

/** The engine's headers as the client gets them: a new object, without the connection's own (and a stream's length, which the gateway may change). */
function passedHeaders(h: Record<string, string>, sse: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in h) {
    const v = h[k];
    if (v === undefined || hopByHop.has(k) || (sse && k === 'content-length')) continue;
    out[k] = v;
  }
  return out;
}
