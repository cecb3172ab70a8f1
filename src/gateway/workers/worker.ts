import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { connect, type Socket } from 'node:net';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';

import type { Logger } from 'pino';

import { Gateway } from '../gateway.js';
import type { GatewayKeys, GatewayPrincipal } from '../keys.js';
import type { KeyLimits } from '../services.js';
import { GatewayError, type GatewayErrorCode } from '../openai-errors.js';
import type { FastHandler } from '../../http1/fast-lane.js';
import { nodeRequest } from '../../http1/client-io.js';
import { formatPreamble } from '../../http1/relay-preamble.js';
import type { RouteTable } from '../../protocol/routes.js';
import type { ScaleSignals } from '../../protocol/load-report.js';
import { HttpServer } from '../../http1/http-server.js';

import type { Call, CallResult, ToPrimary, ToWorker, WireError, WorkerInit } from './messages.js';
import { hopByHop } from '../../http1/hop-by-hop.js';

/** How long a call to the primary may take before the request is refused (it is on this machine). */
const callTimeoutMs = 10_000;

/** The worker's end of its IPC channel: calls answered by the primary, and messages. */
export class Channel {
  readonly #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  #next = 1;

  send(m: ToPrimary): Promise<void> {
    return new Promise((resolve) => {
      if (process.send === undefined || !process.connected) {
        resolve();
        return;
      }
      process.send(m, undefined, {}, () => {
        resolve();
      });
    });
  }

  call<M extends Call['method']>(call: Extract<Call, { method: M }>): Promise<CallResult[M]> {
    const id = this.#next++;
    return new Promise<CallResult[M]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(primaryAway(`it did not answer in ${callTimeoutMs / 1000} s`));
      }, callTimeoutMs);
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      if (process.send === undefined || !process.connected) {
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(primaryAway('its channel is closed'));
        return;
      }
      process.send({ t: 'call', id, call } satisfies ToPrimary);
    });
  }

  reply(id: number, value: unknown, error: WireError | undefined): void {
    const p = this.#pending.get(id);
    if (p === undefined) return;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    if (error === undefined) p.resolve(value);
    else
      p.reject(
        new GatewayError(error.code as GatewayErrorCode, error.message, { retryAfterS: error.retryAfterS }),
      );
  }
}

function primaryAway(why: string): GatewayError {
  return new GatewayError(
    'no_ready_replica',
    `this gateway worker cannot reach its primary process (${why}): retry in a moment`,
    { retryAfterS: 5 },
  );
}

/** Keys answered by the primary, kept here `ttlMs` (a revocation reaches workers within it). */
function workerKeys(channel: Channel, ttlMs: number): GatewayKeys {
  const recent = new Map<string, { p: GatewayPrincipal; until: number }>();
  return {
    async check(secret) {
      const now = Date.now();
      if (secret !== undefined) {
        const hit = recent.get(secret);
        if (hit !== undefined && hit.until > now) return hit.p;
      }
      // No key at all is the primary's to refuse too: one place words every refusal.
      const p = await channel.call({ method: 'key', secret: secret ?? '' });
      if (secret !== undefined) {
        if (recent.size >= 10_000) recent.clear();
        recent.set(secret, { p, until: now + ttlMs });
      }
      return p;
    },
  };
}

/**
 * The autoscaler's signals from a worker: its load reports and wake-ups go to the primary,
 * which hands them to its own (in memory in the control plane, over the API in `llmgw gateway`).
 */
export function workerSignals(channel: Channel): ScaleSignals {
  return {
    report: (report) => channel.send({ t: 'report', report }),
    wake: (model) => channel.call({ method: 'wake', model }),
  };
}

/** A key without limits costs nothing here; one with limits is counted by the primary, for every worker at once. */
function workerLimits(channel: Channel): KeyLimits {
  return {
    admit(key, limits) {
      if (limits.rpm === null && limits.tpm === null) return undefined;
      return channel.call({ method: 'admit', key, rpm: limits.rpm, tpm: limits.tpm });
    },
    charge(key, tokens, limits) {
      if (limits.tpm === null || tokens <= 0) return;
      void channel.send({ t: 'charge', key, tokens, tpm: limits.tpm });
    },
  };
}

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
function pipeUpgrade(
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
function proxyToPrimary(relayPath: string): (req: IncomingMessage, res: ServerResponse) => void {
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

/** One gateway worker: its own Gateway on its share of the public address; state through the primary. */
export async function runWorker(logger: Logger): Promise<void> {
  const channel = new Channel();
  let stopping = false;
  // The primary gone (killed, even before it sent the socket): nothing is left to relay to or
  // to answer keys, and the address must be free for the next start.
  const relay: { dir?: string } = {};
  process.on('disconnect', () => {
    if (stopping) return;
    // A primary killed leaves its relay socket's directory: the first of its workers to go removes it.
    if (relay.dir !== undefined) rmSync(relay.dir, { recursive: true, force: true });
    process.exit(0);
  });
  const got = await new Promise<{ init: WorkerInit; handle: object }>((resolve) => {
    const first = (m: ToWorker, handle: unknown) => {
      if (m.t !== 'init') return;
      process.off('message', first);
      resolve({ init: m, handle: handle as object });
    };
    process.on('message', first);
  });
  const { init } = got;
  relay.dir = dirname(init.relayPath);
  let routes: RouteTable = init.routes;
  const pid = String(process.pid);
  const gateway = new Gateway({
    keys: workerKeys(channel, init.keyTtlMs),
    routes: { routeTable: () => Promise.resolve(routes) },
    usage: { write: (rows) => channel.call({ method: 'usage', rows }) },
    limits: workerLimits(channel),
    signals: workerSignals(channel),
    logger,
    ...init.gateway,
  });
  // The worker's own requests per replica, posted once per turn for its peers to count.
  let posting = false;
  gateway.router.onInFlightChange(() => {
    if (posting) return;
    posting = true;
    setImmediate(() => {
      posting = false;
      void channel.send({ t: 'inflight', counts: gateway.router.ownInFlight() });
    });
  });
  // Its breakers follow the primary's board, told what changed them here.
  gateway.router.onBreakerEvidence(
    (replica, evidence) => void channel.send({ t: 'breaker', replica, evidence }),
  );
  /** Upgraded connections relayed to the primary: it ends them as it stops; past the grace, they are cut here. */
  const piped = new Set<Duplex>();
  const http = new HttpServer({
    maxConnectionsPerClient: init.maxConnectionsPerClient,
    ...(init.tls === undefined ? {} : { tls: init.tls }),
  });
  // Its connections per client address, posted once per turn: the bound holds for all workers.
  const clients = http.clients;
  let postingClients = false;
  clients?.onChange(() => {
    if (postingClients) return;
    postingClients = true;
    setImmediate(() => {
      postingClients = false;
      void channel.send({ t: 'connections', counts: clients.takeChanges() });
    });
  });
  // Which process answered: for people reading a trace, and for tests of the workers.
  const named: FastHandler = (req, res) => {
    const writeHead = res.writeHead.bind(res);
    res.writeHead = (status, headers) => writeHead(status, { ...headers, 'x-llmgw-worker': pid });
    gateway.handle(req, res);
  };
  http.fastLane('/v1/', {
    maxBodyBytes: gateway.maxBodyBytes,
    handler: named,
    fallback: (req, res) => {
      res.setHeader('x-llmgw-worker', pid);
      gateway.handle(nodeRequest(req), res);
    },
  });
  http.mount('/metrics', (req, res) => {
    // Another path under the prefix (on a connection node:http holds here): the gateway's 404.
    if ((req.url ?? '/').split('?')[0] !== '/metrics') {
      void gateway.metricsHandler(nodeRequest(req), res);
      return;
    }
    void (async () => {
      try {
        await gateway.checkKey(req.headers, '/metrics');
        const m = await channel.call({ method: 'metrics' });
        res.writeHead(200, { 'content-type': m.contentType, 'x-llmgw-worker': pid });
        res.end(m.text);
      } catch {
        // The refusal in the gateway's words (no key, wrong role).
        void gateway.metricsHandler(nodeRequest(req), res);
      }
    })();
  });
  http.fallback(proxyToPrimary(init.relayPath));
  http.upgradeFallback((req, socket, head) => {
    pipeUpgrade(req, socket, head, { relayPath: init.relayPath, logger, piped });
  });

  process.on('message', (m: ToWorker) => {
    switch (m.t) {
      case 'routes':
        routes = m.routes;
        void gateway.refresh();
        break;
      case 'cert':
        http.setCertificate(m.tls);
        break;
      case 'peers':
        gateway.router.setPeerInFlight(m.counts);
        break;
      case 'breakers':
        gateway.router.adoptBreakers(m.states);
        break;
      case 'peer-connections':
        clients?.setPeers(m.counts);
        break;
      case 'reply':
        channel.reply(m.id, m.value, m.error);
        break;
      case 'collect':
        void gateway.metrics.registry
          .getMetricsAsJSON()
          .then((metrics) => channel.send({ t: 'collected', id: m.id, metrics }));
        break;
      case 'stop':
        void stop(m.graceMs);
        break;
      case 'init':
        break;
    }
  });
  const stop = async (graceMs: number) => {
    if (stopping) return;
    stopping = true;
    clearInterval(counting);
    const cut = setTimeout(() => {
      for (const s of piped) s.destroy();
    }, graceMs);
    await http.close(graceMs);
    clearTimeout(cut);
    await gateway.stop();
    await channel.send({ t: 'counts', counts: gateway.metrics.counts() });
    process.disconnect();
  };
  const counting = setInterval(
    () => void channel.send({ t: 'counts', counts: gateway.metrics.counts() }),
    1000,
  );
  counting.unref();
  await gateway.start();
  gateway.router.adoptBreakers(init.breakers);
  try {
    await http.listenOn(got.handle);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    await channel.send({ t: 'failed', code: err.code, message: err.message });
    throw e;
  }
  await channel.send({ t: 'listening' });
  logger.info({ slot: init.slot, pid: process.pid }, 'gateway worker listening');
}
