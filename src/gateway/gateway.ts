import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

import type { Logger } from 'pino';

import { didYouMean } from '../core/did-you-mean.js';
import { clientText } from '../core/redact.js';
import { requestIdFrom } from '../core/request-id.js';
import { UpstreamPool } from '../http1/upstream-pool.js';
import type { GatewayLoadReport, ScaleSignals } from '../protocol/load-report.js';
import type { CatalogEntry, RouteReplica, RouteTable } from '../protocol/routes.js';

import type { ClientResponse, GatewayRequest } from '../http1/client-io.js';
import { GatewayMetrics } from './gateway-metrics.js';
import { forward, type Exchange, type ForwardContext } from './forward.js';
import { IdleWatch } from './idle-watch.js';
import { ModelDemand, sendReports } from './load-figures.js';
import { admitKey, type GatewayKeys, type GatewayPrincipal, type KeyHeaders, type KeyScope } from './keys.js';
import { allFailed, GatewayError, sendError, toGatewayError } from './openai-errors.js';
import { RateLimits, type LimitRefusal } from './rate-limits.js';
import { poolHealth, ReplicaHealth } from './replica-health.js';
import { parseBody, requestProblem } from './request-checks.js';
import { promptBlocks } from './router/prefix-blocks.js';
import { restartingModels, Router, type RouterOptions } from './router/index.js';
import { Scraper } from './router/scraper.js';
import { RouterError } from './router/types.js';
import { UsageRecorder, type UsageSink } from './usage-recorder.js';
import { WaitingRoom } from './waiting-room.js';
import { WaitingStream } from './waiting-stream.js';

export interface GatewayOptions {
  keys: GatewayKeys;
  /** The ready replicas and the catalog, asked again every `refreshMs`. */
  routes: () => Promise<RouteTable>;
  usage: UsageSink;
  logger: Logger;
  maxBodyBytes?: number;
  queue?: { maxPerModel: number; timeoutMs: number };
  refreshMs?: number;
  scrapeMs?: number;
  /** Other replicas tried after one refused the connection or failed before the first byte (see forward). */
  retries?: number;
  /**
   * How long an engine may send nothing on a request (before its answer's head, or between
   * bytes of it) before the request is answered 504 and the replica leaves rotation (default 300 s).
   */
  upstreamIdleMs?: number;
  /**
   * Where the load report goes every `reportMs` and wake-ups of models scaled to zero are
   * asked for: the autoscaler in process, or the control plane's API (remoteSignals).
   */
  signals?: ScaleSignals | undefined;
  /** How often the load report is sent (default 1 s). */
  reportMs?: number;
  /** This gateway's name in its load reports (default host:pid:random). */
  gatewayId?: string;
  /**
   * Requests for a model scaled to zero (wakeable, no ready replica) wait while one starts:
   * at most `maxPerModel` per model (default 1000), each for `timeoutMs` (default 300 s).
   * Streamed ones get an SSE comment every `heartbeatMs` (default 5 s); the model is woken
   * again every `wakeEveryMs` (default 5 s) and the routes read every `refreshMs` (default 250 ms).
   */
  waitingRoom?: {
    maxPerModel: number;
    timeoutMs: number;
    heartbeatMs?: number;
    wakeEveryMs?: number;
    refreshMs?: number;
  };
  /** How replicas are picked (the router's policy, bounds and pick hook); the defaults serve. */
  routing?: Pick<RouterOptions, 'policy' | 'pick' | 'affinityBound' | 'prefixBound' | 'prefixMaxBlocks'>;
  /** Where keys' rpm and tpm are counted: in this process by default; a gateway worker asks its primary. */
  limits?: KeyLimits;
}

/** Requests and tokens per key, counted where every gateway worker's requests count. */
export interface KeyLimits {
  admit(
    key: string,
    limits: { rpm: number | null; tpm: number | null },
  ): LimitRefusal | undefined | Promise<LimitRefusal | undefined>;
  charge(key: string, tokens: number, limits: { tpm: number | null }): void;
}

const chatPaths = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);
/** Model and adapter names are DNS labels: a longer name is refused before any work is done with it. */
const nameMax = 63;
/** Engines that serve OpenAI's Responses API. */
const responsesEngines = new Set(['vllm', 'sglang']);

/**
 * The OpenAI-compatible front door: authenticates the key, checks what it may use and
 * its limits, picks the least-loaded ready replica of the model (the router), sends the
 * body on with only the model name changed, and streams the answer back as it comes,
 * counting tokens from the engine's own usage. It is called by the front door's fast
 * path (or node:http for what that leaves) and speaks to engines over its own HTTP/1.1
 * connection pools: no framework and no per-request objects beyond its own.
 */
export class Gateway {
  readonly #o: GatewayOptions;
  readonly router: Router;
  readonly #scraper: Scraper;
  readonly #limits: KeyLimits;
  readonly #usage: UsageRecorder;
  readonly metrics: GatewayMetrics;
  readonly #pools = new Map<string, UpstreamPool>();
  readonly #idle: IdleWatch;
  #table: RouteTable = { replicas: [], models: [] };
  /** The CA that https:// endpoints chain to (the route table's). */
  #ca: string | undefined;
  /** The table's models by name. */
  #catalog = new Map<string, CatalogEntry>();
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
    this.#forwarding = {
      pool: (endpoint) => this.#pool(endpoint),
      idle: this.#idle,
      metrics: this.metrics,
      health: new ReplicaHealth({ get: poolHealth((endpoint) => this.#pool(endpoint)) }),
      account: (x) => this.#account(x),
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
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
  }

  /** Takes the route table again; a failure keeps the last one (the gateway serves alone for a while). */
  async refresh(): Promise<void> {
    if (this.#refreshing) return;
    this.#refreshing = true;
    try {
      const table = await this.#o.routes();
      this.#table = table;
      this.#catalog = new Map(table.models.map((m) => [m.name, m]));
      this.metrics.setCatalog(table.models);
      this.router.setReplicas(table.replicas, restartingModels(table.models, Date.now()));
      this.#scraper.setCa(table.ca);
      this.#scraper.setReplicas(table.replicas);
      // Connections to engines that are gone are closed (requests on them finish first),
      // and every TLS one when the cluster CA changed.
      const live = new Set(table.replicas.map((r) => r.endpoint));
      const caChanged = table.ca !== this.#ca;
      this.#ca = table.ca;
      for (const [endpoint, pool] of this.#pools) {
        if (live.has(endpoint) && !(caChanged && endpoint.startsWith('https:'))) continue;
        this.#pools.delete(endpoint);
        void pool.close();
      }
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
    const x: Exchange = {
      requestId: requestIdFrom(req.headers['x-request-id']),
      started: performance.now(),
      retries: 0,
      queuedMs: 0,
    };
    this.#serve(req, res, x).catch((e: unknown) => this.#fail(res, x, e));
  }

  /** Prometheus text, at /metrics only, for an admin key or a metrics key: it names every key. */
  async metricsHandler(req: GatewayRequest, res: ClientResponse): Promise<void> {
    const x: Exchange = {
      requestId: requestIdFrom(req.headers['x-request-id']),
      started: performance.now(),
      retries: 0,
      queuedMs: 0,
    };
    try {
      const path = (req.url ?? '/').split('?')[0] ?? '/';
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
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    x.principal = await this.checkKey(req.headers, '/v1');
    // HEAD as GET, as HTTP asks: both HTTP layers send its head alone.
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/v1/models') {
      this.#models(res, x);
      return;
    }
    if (req.method !== 'POST' || !chatPaths.has(path)) {
      throw new GatewayError(
        'not_found',
        `no route ${req.method ?? ''} ${clientText(path, 100)}: the gateway serves GET /v1/models and POST /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/responses`,
      );
    }
    const raw = await req.body(this.maxBodyBytes);
    const body = parseBody(raw);
    const model = body['model'];
    if (typeof model !== 'string' || model === '')
      throw new GatewayError('invalid_request', 'model is required: name one of GET /v1/models', {
        param: 'model',
      });
    const colon = model.indexOf(':');
    const base = colon < 0 ? model : model.slice(0, colon);
    const adapter = colon < 0 ? undefined : model.slice(colon + 1);
    if (base.length > nameMax || (adapter?.length ?? 0) > nameMax) {
      // Anyone may send a megabyte here: it is neither repeated nor compared with anything.
      throw new GatewayError(
        'invalid_request',
        `the model name is ${model.length} characters long: models and adapters are named by DNS labels of at most ${nameMax} characters (MODEL, or MODEL:ADAPTER); GET /v1/models lists them`,
        { param: 'model' },
      );
    }
    x.model = model;
    x.base = base;
    const entry = this.#entry(base, adapter, x.principal);
    const problem = requestProblem(path, body);
    if (problem !== undefined) throw problem;
    this.#demand.requested(base);
    if (path === '/v1/responses' && !entry.engines.some((e) => responsesEngines.has(e))) {
      throw new GatewayError(
        'not_found',
        `model ${base} runs on ${entry.engines.join(', ')}, which does not serve /v1/responses: use /v1/chat/completions`,
      );
    }
    let refusal = this.#limits.admit(x.principal.name, x.principal);
    // Only a key with limits, in a gateway worker, waits for its primary's count.
    if (refusal instanceof Promise) refusal = await refusal;
    if (refusal !== undefined)
      throw new GatewayError('rate_limit_exceeded', refusal.message, { retryAfterS: refusal.retryAfterS });

    const stream = body['stream'] === true;
    x.stream = stream;
    const streamOptions = body['stream_options'] as { include_usage?: unknown } | undefined;
    // Usage of a stream comes only when asked for; ask, and drop that chunk if the client did not.
    const addUsage = stream && path !== '/v1/responses' && streamOptions?.include_usage !== true;
    // One listener for the client going away: it cancels whatever the request is doing then.
    res.once('close', () => {
      if (!res.writableFinished) x.cancel?.();
    });
    // A model scaled to zero: wait for a replica to start rather than be refused.
    let out: ClientResponse = res;
    if (entry.wakeable === true && !this.router.has(base)) {
      const waited = await this.#waitForReplica(res, x, base);
      if (waited === undefined) return;
      out = waited;
    }
    const tried = new Set<string>();
    // A conversation key and the prompt's leading blocks only matter when there is a choice of replicas.
    const choice = this.router.replicaCount(base) > 1;
    const affinity = choice ? affinityKey(req.headers, body) : undefined;
    const prefix = choice && this.router.prefixAware ? promptBlocks(body) : undefined;
    const attempts = 1 + (this.#o.retries ?? 2);
    for (let attempt = 0; attempt < attempts; attempt++) {
      let lease = this.router.tryAcquire(base, {
        affinityKey: affinity,
        exclude: tried,
        prefix,
        requestId: x.requestId,
      });
      if (lease === undefined) {
        // Only a request that may wait pays for an AbortSignal.
        const abort = new AbortController();
        x.cancel = () => abort.abort();
        try {
          lease = await this.router.acquire(base, {
            affinityKey: affinity,
            exclude: tried,
            signal: abort.signal,
            prefix,
            requestId: x.requestId,
          });
        } catch (e) {
          if (e instanceof RouterError && e.refusal.kind === 'cancelled') {
            this.#log(x, 499);
            return;
          }
          throw e;
        } finally {
          x.cancel = undefined;
        }
      }
      x.queuedMs += lease.queuedMs;
      tried.add(lease.replica.id);
      x.replica = lease.replica.id;
      // Sent as it came when the engine takes it as it is: no second serialisation.
      const unchanged = adapter === undefined && !addUsage && lease.replica.servedName === model;
      const payload = unchanged ? raw : upstreamBody(body, lease.replica, adapter, addUsage);
      const outcome = await forward(this.#forwarding, {
        req,
        res: out,
        x,
        lease,
        path,
        payload,
        stripUsage: addUsage,
      });
      if (outcome !== 'retry') return;
      x.retries++;
      this.metrics.retry(base);
    }
    throw allFailed(base, x.error);
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
      catalog: this.#catalog.keys(),
      loads: this.router.loads(),
      queued: (m) => this.router.queued(m),
      waiting: (m) => this.#room.waiting(m),
      inFlight: (m) => this.router.inFlight(m),
    });
  }

  #entry(base: string, adapter: string | undefined, principal: GatewayPrincipal): CatalogEntry {
    const entry = this.#catalog.get(base);
    if (entry === undefined) {
      const names = this.#table.models
        .map((m) => m.name)
        .filter((n) => principal.allowedModels === null || principal.allowedModels.includes(n));
      // Cheap even over thousands of models: the name is at most 63 characters, and most candidates are skipped by length.
      const near = didYouMean(base, names);
      const list = names.slice(0, 8).join(', ');
      throw new GatewayError(
        'model_not_found',
        `model "${base}" does not exist${near === undefined ? '' : `; did you mean "${near}"?`}${list === '' ? '' : ` (models: ${list})`}`,
        { param: 'model' },
      );
    }
    if (principal.allowedModels !== null && !principal.allowedModels.includes(base)) {
      throw new GatewayError(
        'model_not_allowed',
        `key "${principal.name}" may not use model "${base}" (it may use: ${principal.allowedModels.join(', ')}); ask an admin (llmgw ctl key update)`,
        { param: 'model' },
      );
    }
    if (adapter !== undefined && !entry.adapters.includes(adapter)) {
      throw new GatewayError(
        'model_not_found',
        `model "${base}" has no adapter "${adapter}"${entry.adapters.length === 0 ? '' : ` (its adapters: ${entry.adapters.join(', ')})`}`,
        { param: 'model' },
      );
    }
    return entry;
  }

  #models(res: ClientResponse, x: Exchange): void {
    const allowed = x.principal?.allowedModels ?? null;
    const created = Math.floor(Date.now() / 1000);
    const data: Record<string, unknown>[] = [];
    for (const m of this.#table.models) {
      if (allowed !== null && !allowed.includes(m.name)) continue;
      const ready = this.#table.replicas.filter((r) => r.model === m.name).length;
      data.push({
        id: m.name,
        object: 'model',
        created,
        owned_by: 'llmgw',
        ready_replicas: ready,
        ...(m.wakeable === true && ready === 0 ? { scaled_to_zero: true } : {}),
        ...(m.context_length === undefined ? {} : { context_length: m.context_length }),
      });
      for (const a of m.adapters)
        data.push({
          id: `${m.name}:${a}`,
          object: 'model',
          created,
          owned_by: 'llmgw',
          parent: m.name,
          ready_replicas: ready,
          ...(m.wakeable === true && ready === 0 ? { scaled_to_zero: true } : {}),
        });
    }
    const text = JSON.stringify({ object: 'list', data });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'x-request-id': x.requestId,
    });
    res.end(text);
  }

  /** The connections to one engine, made once and kept. */
  #pool(endpoint: string): UpstreamPool {
    let pool = this.#pools.get(endpoint);
    if (pool === undefined) {
      // No answer timeout: a long answer is not streamed, and a stream may pause.
      pool = new UpstreamPool(endpoint, { ca: this.#ca });
      this.#pools.set(endpoint, pool);
    }
    return pool;
  }

  /** Counts an answered request: usage, the key's tokens, metrics. */
  #account(x: Exchange): void {
    const key = x.principal?.name ?? '-';
    const model = x.model ?? '-';
    const prompt = x.usage?.prompt ?? 0;
    const completion = x.usage?.completion ?? 0;
    this.#usage.record({ key, model, prompt, completion });
    if (x.principal !== undefined) this.#limits.charge(key, prompt + completion, x.principal);
    this.metrics.countTokens(x.model, key, prompt, completion);
    if (x.ttftMs !== undefined) this.metrics.ttftFor(x.model).observe(x.ttftMs / 1000);
    if (x.roomAt !== undefined && x.base !== undefined && (x.status ?? 200) < 400) {
      // To the first token of a stream, else to the whole answer (now).
      const end = x.ttftMs === undefined ? performance.now() : x.started + x.ttftMs;
      const ms = Math.max(0, end - x.roomAt);
      this.#demand.coldStart(x.base, ms);
      this.metrics.coldStarted(x.base, ms / 1000);
    }
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
    const ms = performance.now() - x.started;
    this.metrics.answered(x.model, x.principal?.name, status, ms / 1000);
    if (!this.#o.logger.isLevelEnabled('info')) return;
    this.#o.logger.info(
      {
        requestId: x.requestId,
        key: x.principal?.name,
        // What clients send is cut short and has secrets redacted: anyone may send a megabyte, or a key.
        model: x.model === undefined ? undefined : clientText(x.model, 100),
        replica: x.replica,
        status,
        ms: Math.round(ms * 10) / 10,
        ...(x.ttftMs === undefined ? {} : { ttftMs: Math.round(x.ttftMs * 10) / 10 }),
        ...(x.queuedMs > 0 ? { queuedMs: Math.round(x.queuedMs) } : {}),
        ...(x.retries > 0 ? { retries: x.retries } : {}),
        ...(x.stream === undefined ? {} : { stream: x.stream }),
        ...(x.usage === undefined
          ? {}
          : { promptTokens: x.usage.prompt, completionTokens: x.usage.completion }),
        ...(x.error === undefined ? {} : { error: clientText(x.error, 500) }),
      },
      'gateway request',
    );
  }
}

/** The body as this replica's engine takes it: its name for the model, the adapter, usage asked for. */
export function upstreamBody(
  body: Record<string, unknown>,
  replica: RouteReplica,
  adapter: string | undefined,
  addUsage: boolean,
): string {
  const out: Record<string, unknown> = { ...body, model: replica.servedName };
  if (adapter !== undefined) {
    if (replica.engine === 'llamacpp') {
      // llama.cpp loads adapters at scale 0 and applies them per request by position.
      out['lora'] = [{ id: replica.adapters.indexOf(adapter), scale: 1 }];
    } else {
      out['model'] = adapter;
    }
  }
  if (addUsage)
    out['stream_options'] = {
      ...(body['stream_options'] as Record<string, unknown> | undefined),
      include_usage: true,
    };
  return JSON.stringify(out);
}

/**
 * Which conversation a request belongs to: the client's `x-session-id`, else a hash of
 * what starts it (system prompt and first message, or the prompt's start), so a
 * conversation's next turn finds the replica whose prefix cache holds it.
 */
export function affinityKey(
  headers: GatewayRequest['headers'],
  body: Record<string, unknown>,
): string | undefined {
  const session = headers['x-session-id'];
  if (typeof session === 'string' && session !== '') return `s:${session}`;
  const messages = body['messages'];
  if (Array.isArray(messages) && messages.length > 0)
    return `m:${fnv1a(JSON.stringify(messages.slice(0, 2)))}`;
  const prompt = body['prompt'];
  if (typeof prompt === 'string' && prompt.length > 0) return `p:${fnv1a(prompt.slice(0, 1024))}`;
  return undefined;
}

function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}
