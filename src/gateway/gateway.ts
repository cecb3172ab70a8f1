import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

import { clientText } from '../core/redact.js';
import type { ClientResponse, GatewayRequest } from '../http1/client-io.js';
import type { GatewayLoadReport } from '../protocol/load-report.js';

import { Accounting } from './accounting.js';
import { checkEngineRoute, checkRoute, isModelList, modelOf } from './admission.js';
import { EnginePools } from './engine-pools.js';
import { newExchange, pathOf, type Exchange } from './exchange.js';
import { logExchange } from './exchange-log.js';
import { forward, type ForwardContext } from './forward.js';
import { GatewayMetrics } from './gateway-metrics.js';
import type { GatewayOptions } from './gateway-options.js';
import { IdleWatch } from './idle-watch.js';
import { admitKey, type GatewayPrincipal, type KeyHeaders, type KeyScope } from './keys.js';
import { ModelDemand, sendReports } from './load-figures.js';
import { ModelCatalog } from './model-catalog.js';
import { allFailed, GatewayError, sendError, toGatewayError } from './openai-errors.js';
import { RateLimits } from './rate-limits.js';
import { poolHealth, ReplicaHealth } from './replica-health.js';
import { parseBody, requestProblem } from './request-checks.js';
import { promptBlocks } from './router/prefix-blocks.js';
import { restartingModels, Router, type AcquireOptions, type Lease } from './router/index.js';
import { Scraper } from './router/scraper.js';
import { RouterError } from './router/types.js';
import type { KeyLimits } from './services.js';
import { affinityKey, upstreamBody } from './upstream-body.js';
import { UsageRecorder } from './usage-recorder.js';
import { WaitingRoom } from './waiting-room.js';
import { WaitingStream } from './waiting-stream.js';

export type { GatewayOptions } from './gateway-options.js';
export type { KeyLimits } from './services.js';

/** A request past admission: what it asked for, as the engine will get it. */
interface Admitted {
  path: string;
  /** The body as it came, sent on as it is where nothing in it changes. */
  raw: Buffer;
  body: Record<string, unknown>;
  /** `MODEL` or `MODEL:ADAPTER`, as asked for. */
  model: string;
  base: string;
  adapter: string | undefined;
  /** Its model may be at zero, woken for it (the waiting room). */
  wakeable: boolean;
  /** A stream whose usage the gateway asks for, and drops since the client did not. */
  addUsage: boolean;
}

/**
 * The OpenAI-compatible front door: authenticates the key, checks what it may use and
 * its limits, picks the least-loaded ready replica of the model (the router), sends the
 * body on with only the model name changed, and streams the answer back as it comes,
 * counting tokens from the engine's own usage. It is called by the front door's fast
 * path (or node:http for what that leaves) and speaks to engines over its own HTTP/1.1
 * connection pools: no framework and no per-request objects beyond its own.
 *
 * A request's steps: admit (key, route, body, model, limits), wait (a model at zero),
 * choose (a replica from the router, queued while all are full), forward and relay
 * (./forward.ts), account (./accounting.ts); a failure anywhere is answered by #fail.
 */
export class Gateway {
  readonly #o: GatewayOptions;
  readonly router: Router;
  readonly #scraper: Scraper;
  readonly #limits: KeyLimits;
  readonly #usage: UsageRecorder;
  readonly metrics: GatewayMetrics;
  readonly #pools = new EnginePools();
  readonly #idle: IdleWatch;
  /** The route table's models. */
  readonly #catalog = new ModelCatalog();
  #timer: NodeJS.Timeout | undefined;
  #refreshing = false;
  readonly #room: WaitingRoom;
  readonly #gatewayId: string;
  /** Requests per catalog model, the last one's time (the autoscaler's idle clock), the last cold start. */
  readonly #demand = new ModelDemand();
  #stopReports: (() => void) | undefined;
  /** What an attempt on a replica needs of this gateway. */
  readonly #forwarding: ForwardContext;

  constructor(options: GatewayOptions) {
    this.#o = options;
    this.#limits = options.limits ?? new RateLimits();
    this.router = new Router({
      ...options.routing,
      ...(options.queue === undefined ? {} : { queue: options.queue }),
    });
    this.#scraper = new Scraper({
      intervalMs: options.scrapeMs ?? 250,
      onReading: (id, reading) => this.router.recordReading(id, reading),
      onFailure: (id, error, kind) => this.router.recordScrapeFailure(id, error, kind),
    });
    this.#usage = new UsageRecorder({ sink: options.usage, logger: options.logger });
    this.#idle = new IdleWatch(options.upstreamIdleMs ?? 300_000);
    const room = options.waitingRoom;
    const signals = options.signals;
    this.#room = new WaitingRoom({
      maxPerModel: room?.maxPerModel ?? 1000,
      timeoutMs: room?.timeoutMs ?? 300_000,
      wakeEveryMs: room?.wakeEveryMs,
      refreshMs: room?.refreshMs,
      wake: signals === undefined ? undefined : (model) => signals.wake(model),
      refresh: () => void this.refresh(),
      view: {
        ready: (model) => this.router.has(model),
        room: (model) => this.#roomFor(model),
        entry: (model) => this.#catalog.get(model),
      },
      logger: options.logger,
    });
    this.#gatewayId = options.gatewayId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.metrics = new GatewayMetrics(
      () => this.router.loads(),
      (m) => this.router.queued(m),
      () => this.#room.counts(),
    );
    const accounting = new Accounting({
      usage: this.#usage,
      limits: this.#limits,
      metrics: this.metrics,
      demand: this.#demand,
    });
    this.#forwarding = {
      pool: (endpoint) => this.#pools.get(endpoint),
      idle: this.#idle,
      metrics: this.metrics,
      health: new ReplicaHealth({ get: poolHealth((endpoint) => this.#pools.get(endpoint)) }),
      account: (x) => accounting.account(x),
      log: (x, status) => this.#log(x, status),
    };
  }

  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => void this.refresh(), this.#o.refreshMs ?? 500);
    this.#timer.unref();
    if (this.#o.signals !== undefined)
      this.#stopReports = sendReports({
        signals: this.#o.signals,
        build: () => this.loadReport(),
        everyMs: this.#o.reportMs ?? 1000,
        logger: this.#o.logger,
      });
  }

  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#stopReports?.();
    this.#room.stop();
    this.#idle.stop();
    this.#scraper.stop();
    await this.#usage.stop();
    await this.#pools.close();
  }

  /** Takes the route table again; a failure keeps the last one (the gateway serves alone for a while). */
  async refresh(): Promise<void> {
    if (this.#refreshing) return;
    this.#refreshing = true;
    try {
      const table = await this.#o.routes.routeTable();
      this.#catalog.set(table);
      this.metrics.setCatalog(table.models);
      this.router.setReplicas(table.replicas, restartingModels(table.models, Date.now()));
      this.#scraper.setCa(table.ca);
      this.#scraper.setReplicas(table.replicas);
      this.#pools.follow(table);
      this.#room.changed();
    } catch (e) {
      this.#o.logger.warn(
        { err: e instanceof Error ? e.message : String(e) },
        'routes not refreshed; serving with the last ones',
      );
    } finally {
      this.#refreshing = false;
    }
  }

  /** The largest request body taken; past it, 413. */
  get maxBodyBytes(): number {
    return this.#o.maxBodyBytes ?? 16 * 1024 * 1024;
  }

  /** Flushes counted usage now (tests; shutdown). */
  flushUsage(): Promise<void> {
    return this.#usage.flush();
  }

  /**
   * The key of a request, from its head alone: whether it may call `scope` at all (which
   * models it may use is known once the body names one). Throws GatewayError. Checked
   * before the body is read, so a request without a valid key costs no more than its head.
   */
  checkKey(headers: KeyHeaders, scope: KeyScope): Promise<GatewayPrincipal> {
    return admitKey(this.#o.keys, headers, scope);
  }

  /** Everything under /v1/. */
  handle(req: GatewayRequest, res: ClientResponse): void {
    const x = newExchange(req);
    this.#serve(req, res, x).catch((e: unknown) => this.#fail(res, x, e));
  }

  /** Prometheus text, at /metrics only, for an admin key or a metrics key: it names every key. */
  async metricsHandler(req: GatewayRequest, res: ClientResponse): Promise<void> {
    const x = newExchange(req);
    try {
      const path = pathOf(req);
      if (path !== '/metrics')
        throw new GatewayError(
          'not_found',
          `no route ${req.method ?? ''} ${clientText(path, 100)}: metrics are at GET /metrics`,
        );
      x.principal = await this.checkKey(req.headers, '/metrics');
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': this.metrics.registry.contentType, 'x-request-id': x.requestId });
      res.end(text);
    } catch (e) {
      this.#fail(res, x, e);
    }
  }

  async #serve(req: GatewayRequest, res: ClientResponse, x: Exchange): Promise<void> {
    const path = pathOf(req);
    const principal = await this.checkKey(req.headers, '/v1');
    x.principal = principal;
    if (isModelList(req.method, path)) {
      this.#catalog.answerList(res, x);
      return;
    }
    const a = await this.#admit(req, x, path, principal);
    // One listener for the client going away: it cancels whatever the request is doing then.
    res.once('close', () => {
      if (!res.writableFinished) x.cancel?.();
    });
    // A model scaled to zero: wait for a replica to start rather than be refused.
    const out = a.wakeable && !this.router.has(a.base) ? await this.#waitForReplica(res, x, a.base) : res;
    if (out === undefined) return;
    await this.#route(req, out, x, a);
  }

  /** Admit: a route the gateway serves, a body it can read, a model the key may use, within the key's limits. */
  async #admit(
    req: GatewayRequest,
    x: Exchange,
    path: string,
    principal: GatewayPrincipal,
  ): Promise<Admitted> {
    checkRoute(req.method, path);
    const raw = await req.body(this.maxBodyBytes);
    const body = parseBody(raw);
    const { model, base, adapter } = modelOf(body);
    x.model = model;
    x.base = base;
    const entry = this.#catalog.entry(base, adapter, principal);
    const problem = requestProblem(path, body);
    if (problem !== undefined) throw problem;
    this.#demand.requested(base);
    checkEngineRoute(path, base, entry);
    let refusal = this.#limits.admit(principal.name, principal);
    // Only a key with limits, in a gateway worker, waits for its primary's count.
    if (refusal instanceof Promise) refusal = await refusal;
    if (refusal !== undefined)
      throw new GatewayError('rate_limit_exceeded', refusal.message, { retryAfterS: refusal.retryAfterS });
    const stream = body['stream'] === true;
    x.stream = stream;
    const streamOptions = body['stream_options'] as { include_usage?: unknown } | undefined;
    // Usage of a stream comes only when asked for; ask, and drop that chunk if the client did not.
    const addUsage = stream && path !== '/v1/responses' && streamOptions?.include_usage !== true;
    return { path, raw, body, model, base, adapter, wakeable: entry.wakeable === true, addUsage };
  }

  /** Choose a replica, forward and relay; another replica after one that failed before its first byte. */
  async #route(req: GatewayRequest, res: ClientResponse, x: Exchange, a: Admitted): Promise<void> {
    const tried = new Set<string>();
    // A conversation key and the prompt's leading blocks only matter when there is a choice of replicas.
    const choice = this.router.replicaCount(a.base) > 1;
    const wants: Omit<AcquireOptions, 'signal'> = {
      affinityKey: choice ? affinityKey(req.headers, a.body) : undefined,
      exclude: tried,
      prefix: choice && this.router.prefixAware ? promptBlocks(a.body) : undefined,
      requestId: x.requestId,
    };
    const attempts = 1 + (this.#o.retries ?? 2);
    for (let n = 0; n < attempts; n++) {
      const lease = this.router.tryAcquire(a.base, wants) ?? (await this.#queue(a.base, x, wants));
      if (lease === undefined) return;
      x.queuedMs += lease.queuedMs;
      tried.add(lease.replica.id);
      x.replica = lease.replica.id;
      // Sent as it came when the engine takes it as it is: no second serialisation.
      const unchanged = a.adapter === undefined && !a.addUsage && lease.replica.servedName === a.model;
      const payload = unchanged ? a.raw : upstreamBody(a.body, lease.replica, a.adapter, a.addUsage);
      const attempt = { req, res, x, lease, path: a.path, payload, stripUsage: a.addUsage };
      if ((await forward(this.#forwarding, attempt)) !== 'retry') return;
      x.retries++;
      this.metrics.retry(a.base);
    }
    throw allFailed(a.base, x.error);
  }

  /** Choose, when no replica is free now: wait in the model's queue. Undefined when the client left (logged). */
  async #queue(base: string, x: Exchange, wants: Omit<AcquireOptions, 'signal'>): Promise<Lease | undefined> {
    // Only a request that may wait pays for an AbortSignal.
    const abort = new AbortController();
    x.cancel = () => abort.abort();
    try {
      return await this.router.acquire(base, { ...wants, signal: abort.signal });
    } catch (e) {
      if (e instanceof RouterError && e.refusal.kind === 'cancelled') {
        this.#log(x, 499);
        return undefined;
      }
      throw e;
    } finally {
      x.cancel = undefined;
    }
  }

  /**
   * Waits in the waiting room (the model is at zero). Undefined when the client left; the
   * response to answer on otherwise (a stream opened while waiting, for a streamed request).
   */
  async #waitForReplica(
    res: ClientResponse,
    x: Exchange,
    model: string,
  ): Promise<ClientResponse | undefined> {
    const abort = new AbortController();
    // Throws at once when the room is full: a plain 503, before any head.
    const waiting = this.#room.enter(model, abort.signal);
    x.roomAt = performance.now();
    x.cancel = () => abort.abort();
    if (x.stream === true) {
      x.out = new WaitingStream(res);
      x.out.open({ model, requestId: x.requestId, everyMs: this.#o.waitingRoom?.heartbeatMs ?? 5000 });
    }
    try {
      const ms = await waiting;
      x.queuedMs += ms;
    } catch (e) {
      if (e instanceof RouterError && e.refusal.kind === 'cancelled') {
        x.out?.stopHeartbeat();
        this.#log(x, 499);
        return undefined;
      }
      throw e;
    } finally {
      x.cancel = undefined;
    }
    return x.out ?? res;
  }

  /** How many requests a model's replicas and its router queue take now (the waiting room hands over this many). */
  #roomFor(model: string): number {
    let free = 0;
    for (const l of this.router.loads())
      if (l.model === model) free += Math.max(0, (l.capacity ?? 1) - l.inFlight);
    return free + Math.max(0, (this.#o.queue?.maxPerModel ?? 256) - this.router.queued(model));
  }

  /**
   * What this gateway sees of each model's load, for the autoscaler: the router's replicas,
   * queue and requests in flight, the waiting room (its requests count as queued), requests
   * taken and the last cold start.
   */
  loadReport(): GatewayLoadReport {
    return this.#demand.report({
      gateway: this.#gatewayId,
      catalog: this.#catalog.names(),
      loads: this.router.loads(),
      queued: (m) => this.router.queued(m),
      waiting: (m) => this.#room.waiting(m),
      inFlight: (m) => this.router.inFlight(m),
    });
  }

  /** Whatever a request threw, answered in OpenAI's shape, counted and logged. */
  #fail(res: ClientResponse, x: Exchange, e: unknown): void {
    const err = toGatewayError(e, {
      model: x.base,
      lastFailure: x.error,
      unavailable: x.base === undefined ? undefined : this.#catalog.get(x.base)?.unavailable,
      maxBodyBytes: this.maxBodyBytes,
      onUnexpected: (u) =>
        this.#o.logger.error(
          { requestId: x.requestId, err: u instanceof Error ? u.stack : String(u) },
          'gateway error',
        ),
    });
    // A stream opened while the request waited ends with the error as its last event.
    x.out?.stopHeartbeat();
    sendError(x.out ?? res, err, x.requestId);
    x.error = err.message;
    this.metrics.refused(x.model, x.principal?.name, err.code);
    this.#log(x, err.status);
  }

  #log(x: Exchange, status: number): void {
    logExchange({ logger: this.#o.logger, metrics: this.metrics }, x, status);
  }
}
