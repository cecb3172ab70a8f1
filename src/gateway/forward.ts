import type { ClientResponse, GatewayRequest } from '../http1/client-io.js';
import { hopByHop } from '../http1/hop-by-hop.js';
import type { UpstreamCall, UpstreamHandler, UpstreamPool } from '../http1/upstream-pool.js';

import type { Exchange } from './exchange.js';
import type { GatewayMetrics } from './gateway-metrics.js';
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
import { scanUsage } from './usage-scan.js';

export type { Exchange } from './exchange.js';

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
  return new Promise((resolve) => new UpstreamAttempt(g, o, resolve).start());
}

/**
 * The engine's answer relayed to the client as it comes: its head (onHead), its bytes
 * (onData: a stream through the SSE relay, a plain answer a chunk behind), its end (onEnd:
 * counted and logged); a refusal before any byte is read whole and answered in OpenAI's
 * shape instead. Settled once: released to the router, logged, resolved.
 */
class UpstreamAttempt implements UpstreamHandler {
  readonly #g: ForwardContext;
  readonly #o: Attempt;
  readonly #resolve: (result: 'done' | 'retry') => void;
  readonly #watched: Watched;
  #call: UpstreamCall | undefined;
  #settled = false;
  /** The engine refused or failed (4xx, 5xx) before any byte went out: its body, read for its words. */
  #refusal: { status: number; parts: Buffer[]; size: number } | undefined;
  #relay: SseRelay | undefined;
  /**
   * A plain answer's head, written with its first bytes: until then nothing reached the
   * client, so an engine that fails or stalls after its head is still retried or answered 504.
   */
  #head: { status: number; headers: Record<string, string> } | undefined;
  /** The end of a plain answer, where its usage is. */
  #tail = '';
  /**
   * The last chunk of a plain answer, held back until the next one comes or the answer ends:
   * a small answer (one chunk, the usual case) then goes out in one write with its end.
   */
  #held: Buffer | undefined;

  constructor(g: ForwardContext, o: Attempt, resolve: (result: 'done' | 'retry') => void) {
    this.#g = g;
    this.#o = o;
    this.#resolve = resolve;
    this.#watched = { lastAt: performance.now(), paused: false, onIdle: () => this.#stalled() };
  }

  /** Sends the request to the replica; the client going away cancels it. */
  start(): void {
    const { req, x, lease } = this.#o;
    const r = lease.replica;
    const accept = req.headers['accept'];
    const call = this.#g.pool(r.endpoint).request(
      {
        method: 'POST',
        path: this.#o.path,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${r.apiKey}`,
          accept: typeof accept === 'string' ? accept : '*/*',
          'x-request-id': x.requestId,
        },
        body: this.#o.payload,
      },
      this,
    );
    this.#call = call;
    x.cancel = () => {
      call.abort();
      this.#settle('cancelled', 'done', 499);
    };
    this.#g.idle.add(this.#watched);
  }

  onHead(status: number, headers: Record<string, string>): void {
    this.#watched.lastAt = performance.now();
    const { res, x, lease } = this.#o;
    if (!res.headersSent && status >= 400) {
      this.#refusal = { status, parts: [], size: 0 };
      return;
    }
    const sse = (headers['content-type'] ?? '').startsWith('text/event-stream');
    const out = passedHeaders(headers, sse);
    out['x-request-id'] = x.requestId;
    // Which replica answered: for people reading a trace, and for tests of routing.
    out['x-llmgw-replica'] = lease.replica.id;
    if (sse) {
      const itl = this.#g.metrics.itlFor(x.model ?? lease.replica.model);
      this.#relay = new SseRelay({
        stripUsage: this.#o.stripUsage,
        onToken: (gap) => {
          if (gap !== undefined) itl.observe(gap / 1000);
        },
      });
      res.writeHead(status, out);
    } else {
      this.#head = { status, headers: out };
    }
    x.status = status;
  }

  onData(chunk: Buffer): void {
    this.#watched.lastAt = performance.now();
    if (this.#settled) return;
    const refusal = this.#refusal;
    if (refusal !== undefined) {
      if (refusal.size < errorBodyMax) refusal.parts.push(chunk);
      refusal.size += chunk.length;
      return;
    }
    const ok = this.#relay === undefined ? this.#passPlain(chunk) : this.#passEvents(this.#relay, chunk);
    if (!ok) this.#waitForDrain();
  }

  onEnd(): void {
    if (this.#settled) return;
    if (this.#refusal !== undefined) {
      this.#refused(this.#refusal);
      return;
    }
    const { res, x } = this.#o;
    const status = x.status ?? 200;
    const relay = this.#relay;
    if (relay !== undefined) {
      const rest = relay.end();
      if (rest === undefined) res.end();
      else res.end(rest);
      x.usage = relay.usage;
      if (relay.firstTokenAt !== undefined) x.ttftMs = relay.firstTokenAt - x.started;
    } else {
      this.#flushHead();
      if (this.#held === undefined) res.end();
      else res.end(this.#held);
      this.#held = undefined;
      if (status < 400) x.usage = scanUsage(this.#tail);
    }
    this.#g.account(x);
    this.#settle('ok', 'done', status);
  }

  onError(e: Error): void {
    if (this.#settled) return;
    const { res, x, lease } = this.#o;
    x.error = `${lease.replica.id}: ${e.message}`;
    if (!res.headersSent) {
      this.#settle('failed', 'retry');
      return;
    }
    // Bytes already reached the client: never sent twice; the client sees the cut.
    res.destroy();
    this.#settle('failed', 'done', 502);
  }

  /** A stream's events, as the relay passes them on (usage the client did not ask for dropped). */
  #passEvents(relay: SseRelay, chunk: Buffer): boolean {
    const out = relay.push(chunk);
    return out === undefined || this.#o.res.write(out);
  }

  /** A plain answer's bytes, a chunk behind; its end kept to read its usage. */
  #passPlain(chunk: Buffer): boolean {
    let ok = true;
    if (this.#held !== undefined) {
      this.#flushHead();
      ok = this.#o.res.write(this.#held);
    }
    this.#held = chunk;
    // Usage is at the end of a JSON answer: keep the end to read it.
    const tail = this.#tail;
    this.#tail =
      tail.length + chunk.length > 8192
        ? (tail + chunk.toString('latin1')).slice(-4096)
        : tail + chunk.toString('latin1');
    return ok;
  }

  /** The client reads slower than the engine writes: the engine waits (and is not idle meanwhile). */
  #waitForDrain(): void {
    this.#call?.pause();
    this.#watched.paused = true;
    this.#o.res.once('drain', () => {
      this.#watched.paused = false;
      this.#call?.resume();
    });
  }

  #flushHead(): void {
    if (this.#head === undefined) return;
    this.#o.res.writeHead(this.#head.status, this.#head.headers);
    this.#head = undefined;
  }

  /** The engine's refusal read whole: retried elsewhere (our key, its failure) or the client's answer. */
  #refused(refusal: { status: number; parts: Buffer[] }): void {
    const { x, lease } = this.#o;
    const id = lease.replica.id;
    const { status } = refusal;
    const body = Buffer.concat(refusal.parts).subarray(0, errorBodyMax).toString('utf8');
    if (status === 401) {
      x.error = `${id} answered 401 (it refused the gateway’s key for it: restart the replica)`;
      this.#settle('failed', 'retry');
    } else if (status >= 500 && status !== 501) {
      this.#judge(status, body);
    } else {
      const error = engineError(status, body);
      x.error = `${id} answered ${status}: ${error.message}`;
      // The replica answered: as good a sign of its health as a 200.
      this.#answerRefusal(error, status, 'ok');
    }
  }

  /** A 5xx before any byte: the replica's own health says whose failure it was. */
  #judge(status: number, body: string): void {
    const { x, lease } = this.#o;
    x.error = `${lease.replica.id} answered ${status}: ${engineError(status, body).message}`;
    this.#g.idle.delete(this.#watched);
    x.cancel = () => this.#settle('cancelled', 'done', 499);
    void this.#g.health.healthy(lease.replica).then((healthy) => {
      if (this.#settled) return;
      if (healthy) this.#answerRefusal(engineRefusal(status, body), 400, 'refused');
      else this.#settle('failed', 'retry');
    });
  }

  /** The engine's refusal, as the client gets it: `status` is the one it goes out with. */
  #answerRefusal(error: ReturnType<typeof engineError>, status: number, outcome: Outcome): void {
    const { res, x, lease } = this.#o;
    sendEngineError(res, { status, error, requestId: x.requestId, replica: lease.replica.id });
    x.status = status;
    this.#g.metrics.refused(x.model, x.principal?.name, 'engine_refused');
    this.#g.account(x);
    this.#settle(outcome, 'done', status);
  }

  /**
   * The engine went silent: the client is told so (not retried: the wait was spent, and a
   * stalled engine's work may still be running), and the replica leaves rotation until a
   * request to it is answered again.
   */
  #stalled(): void {
    if (this.#settled) return;
    this.#call?.abort();
    const { res, x, lease } = this.#o;
    const r = lease.replica;
    const seconds = Math.round(this.#g.idle.idleMs / 100) / 10;
    const error = new GatewayError(
      'upstream_timeout',
      `replica ${r.id} of ${r.model} sent nothing for ${seconds} s (gateway.upstream_idle_timeout_s); it is taken out of rotation until it answers again: send the request again`,
    );
    x.error = error.message;
    this.#g.metrics.refused(x.model, x.principal?.name, error.code);
    if (!res.headersSent) {
      sendError(res, error, x.requestId);
      this.#settle('stalled', 'done', error.status);
      return;
    }
    if (this.#relay !== undefined) {
      // A stream already open ends with an error event, as OpenAI's streams carry one.
      res.end(sseError(error));
      this.#g.account(x);
    } else {
      res.destroy();
    }
    this.#settle('stalled', 'done', x.status ?? 200);
  }

  #settle(outcome: Outcome, result: 'done' | 'retry', status?: number): void {
    if (this.#settled) return;
    this.#settled = true;
    const { x, lease } = this.#o;
    this.#g.idle.delete(this.#watched);
    x.cancel = undefined;
    lease.release(outcome, x.principal?.name);
    if (status !== undefined) this.#g.log(x, status);
    this.#resolve(result);
  }
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
