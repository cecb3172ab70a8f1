import type { IncomingMessage, ServerResponse } from 'node:http';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';

import type { Logger } from 'pino';

import { nodeRequest } from '../../http1/client-io.js';
import type { FastHandler } from '../../http1/fast-lane.js';
import { HttpServer } from '../../http1/http-server.js';
import type { RouteTable } from '../../protocol/routes.js';
import { Gateway } from '../gateway.js';

import { Channel, workerKeys, workerLimits, workerSignals } from './channel.js';
import type { ToWorker, WorkerInit } from './messages.js';
import { pipeUpgrade, proxyToPrimary } from './relay.js';

/** One gateway worker: its own Gateway on its share of the public address; state through the primary. */
export async function runWorker(logger: Logger): Promise<void> {
  const channel = new Channel();
  const life: Life = { stopping: false, relayDir: undefined };
  leaveWithPrimary(life);
  leaveSignalsToPrimary();
  const { init, handle } = await firstInit();
  life.relayDir = dirname(init.relayPath);
  const table = { routes: init.routes };
  const gateway = workerGateway(channel, init, table, logger);
  /** Upgraded connections relayed to the primary: it ends them as it stops; past the grace, they are cut here. */
  const piped = new Set<Duplex>();
  const http = workerHttp({ gateway, channel, init, logger, piped });
  const counting = setInterval(
    () => void channel.send({ t: 'counts', counts: gateway.metrics.counts() }),
    1000,
  );
  counting.unref();
  const stop = async (graceMs: number) => {
    if (life.stopping) return;
    life.stopping = true;
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
  process.on('message', (m: ToWorker) => {
    onPrimaryMessage(m, { table, gateway, http, channel, stop });
  });
  await gateway.start();
  gateway.router.adoptBreakers(init.breakers);
  try {
    await http.listenOn(handle);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    await channel.send({ t: 'failed', code: err.code, message: err.message });
    throw e;
  }
  await channel.send({ t: 'listening' });
  logger.info({ slot: init.slot, pid: process.pid }, 'gateway worker listening');
}

interface Life {
  stopping: boolean;
  /** The relay socket's directory, once known. */
  relayDir: string | undefined;
}

/**
 * The primary gone (killed, even before it sent the socket): nothing is left to relay to or
 * to answer keys, and the address must be free for the next start.
 */
function leaveWithPrimary(life: Life): void {
  process.on('disconnect', () => {
    if (life.stopping) return;
    // A primary killed leaves its relay socket's directory: the first of its workers to go removes it.
    if (life.relayDir !== undefined) rmSync(life.relayDir, { recursive: true, force: true });
    process.exit(0);
  });
}

/**
 * Ctrl-C in a terminal and systemd's stop signal the whole process group, workers included:
 * the primary stops its workers itself, letting what is in flight finish, so a worker leaves
 * those signals to it (a worker dying of one was restarted, and logged as a crash). Without a
 * primary a worker leaves anyway (leaveWithPrimary).
 */
function leaveSignalsToPrimary(): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
}

/** The primary's first message, with the listening socket. */
function firstInit(): Promise<{ init: WorkerInit; handle: object }> {
  return new Promise((resolve) => {
    const first = (m: ToWorker, handle: unknown) => {
      if (m.t !== 'init') return;
      process.off('message', first);
      resolve({ init: m, handle: handle as object });
    };
    process.on('message', first);
  });
}

/** The worker's Gateway: keys, limits, usage and signals through the primary; its in-flight counts and breaker evidence told to it. */
function workerGateway(
  channel: Channel,
  init: WorkerInit,
  table: { routes: RouteTable },
  logger: Logger,
): Gateway {
  const gateway = new Gateway({
    keys: workerKeys(channel, init.keyTtlMs),
    routes: { routeTable: () => Promise.resolve(table.routes) },
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
  return gateway;
}

/** The worker's HTTP server: /v1 and /metrics served here, the rest relayed to the primary. */
function workerHttp(o: {
  gateway: Gateway;
  channel: Channel;
  init: WorkerInit;
  logger: Logger;
  piped: Set<Duplex>;
}): HttpServer {
  const { gateway, channel, init } = o;
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
  mountNamed(http, gateway);
  http.mount('/metrics', (req, res) => void summedMetrics(gateway, channel, req, res));
  http.fallback(proxyToPrimary(init.relayPath));
  http.upgradeFallback((req, socket, head) => {
    pipeUpgrade(req, socket, head, { relayPath: init.relayPath, logger: o.logger, piped: o.piped });
  });
  return http;
}

/** /v1 as mountGateway serves it, each answer naming this process: for people reading a trace, and for tests of the workers. */
function mountNamed(http: HttpServer, gateway: Gateway): void {
  const pid = String(process.pid);
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
}

/** GET /metrics: every process's metrics, summed by the primary, for a key that may read them. */
async function summedMetrics(
  gateway: Gateway,
  channel: Channel,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  // Another path under the prefix (on a connection node:http holds here): the gateway's 404.
  if ((req.url ?? '/').split('?')[0] !== '/metrics') {
    await gateway.metricsHandler(nodeRequest(req), res);
    return;
  }
  try {
    await gateway.checkKey(req.headers, '/metrics');
    const m = await channel.call({ method: 'metrics' });
    res.writeHead(200, { 'content-type': m.contentType, 'x-llmgw-worker': String(process.pid) });
    res.end(m.text);
  } catch {
    // The refusal in the gateway's words (no key, wrong role).
    void gateway.metricsHandler(nodeRequest(req), res);
  }
}

/** What the primary tells a running worker. */
function onPrimaryMessage(
  m: ToWorker,
  w: {
    table: { routes: RouteTable };
    gateway: Gateway;
    http: HttpServer;
    channel: Channel;
    stop: (graceMs: number) => Promise<void>;
  },
): void {
  const { gateway, channel } = w;
  switch (m.t) {
    case 'routes':
      w.table.routes = m.routes;
      void gateway.refresh();
      break;
    case 'cert':
      w.http.setCertificate(m.tls);
      break;
    case 'peers':
      gateway.router.setPeerInFlight(m.counts);
      break;
    case 'breakers':
      gateway.router.adoptBreakers(m.states);
      break;
    case 'peer-connections':
      w.http.clients?.setPeers(m.counts);
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
      void w.stop(m.graceMs);
      break;
    case 'init':
      break;
  }
}
