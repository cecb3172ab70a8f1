import { randomUUID } from 'node:crypto';
import { Agent, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { StringDecoder } from 'node:string_decoder';

import type { Logger } from 'pino';

import { didYouMean } from '../core/did-you-mean.js';
import type { CatalogEntry, RouteReplica, RouteTable } from '../protocol/routes.js';

import { GatewayMetrics } from './gateway-metrics.js';
import { GatewayError, sendError } from './openai-errors.js';
import { RateLimits } from './rate-limits.js';
import { Router } from './router/router.js';
import { Scraper } from './router/scraper.js';
import { RouterError, type Lease, type Outcome } from './router/types.js';
import { SseRelay } from './sse-relay.js';
import { UsageRecorder, type UsageSink } from './usage-recorder.js';
import { scanUsage, type TokenCounts } from './usage-scan.js';

/** Who is calling, as the gateway needs it: the key's name and what it may use. */
export interface GatewayPrincipal {
  name: string;
  allowedModels: string[] | null;
  rpm: number | null;
  tpm: number | null;
}

export interface GatewayKeys {
  /** The key of an `Authorization: Bearer` (or `X-Api-Key`) header; throws GatewayError invalid_api_key. */
  check(secret: string | undefined): Promise<GatewayPrincipal>;
}

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
  /** Other replicas tried after a refusal or a 5xx before the first byte. */
  retries?: number;
}

const chatPaths = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);
/** Engines that serve OpenAI's Responses API. */
const responsesEngines = new Set(['vllm', 'sglang']);
const hopByHop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authenticate', 'proxy-authorization']);

interface Exchange {
  requestId: string;
  started: number;
  principal?: GatewayPrincipal;
  model?: string;
  replica?: string;
  status?: number;
  retries: number;
  queuedMs: number;
  ttftMs?: number;
  usage?: TokenCounts;
  stream?: boolean;
  error?: string;
}

/**
 * The OpenAI-compatible front door: authenticates the key, checks what it may use and
 * its limits, picks the least-loaded ready replica of the model (the router), sends the
 * body on with only the model name changed, and streams the answer back as it comes,
 * counting tokens from the engine's own usage. Plain node:http on both sides: no
 * framework on the hot path.
 */
export class Gateway {
  readonly #o: GatewayOptions;
  readonly router: Router;
  readonly #scraper: Scraper;
  readonly #limits = new RateLimits();
  readonly #usage: UsageRecorder;
  readonly metrics: GatewayMetrics;
  readonly #agent = new Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo', keepAliveMsecs: 10_000 });
  #table: RouteTable = { replicas: [], models: [] };
  #timer: NodeJS.Timeout | undefined;
  #refreshing = false;

  constructor(options: GatewayOptions) {
    this.#o = options;
    this.router = new Router({ ...(options.queue === undefined ? {} : { queue: options.queue }) });
    this.#scraper = new Scraper({
      intervalMs: options.scrapeMs ?? 250,
      onReading: (id, reading) => this.router.recordReading(id, reading),
      onFailure: (id, error, kind) => this.router.recordScrapeFailure(id, error, kind),
    });
    this.#usage = new UsageRecorder({ sink: options.usage, logger: options.logger });
    this.metrics = new GatewayMetrics(
      () => this.router.loads(),
      (m) => this.router.queued(m),
    );
  }

  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => void this.refresh(), this.#o.refreshMs ?? 500);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#scraper.stop();
    await this.#usage.stop();
    this.#agent.destroy();
  }

  /** Takes the route table again; a failure keeps the last one (the gateway serves alone for a while). */
  async refresh(): Promise<void> {
    if (this.#refreshing) return;
    this.#refreshing = true;
    try {
      const table = await this.#o.routes();
      this.#table = table;
      this.router.setReplicas(table.replicas);
      this.#scraper.setReplicas(table.replicas);
    } catch (e) {
      this.#o.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'routes not refreshed; serving with the last ones');
    } finally {
      this.#refreshing = false;
    }
  }

  /** Flushes counted usage now (tests; shutdown). */
  flushUsage(): Promise<void> {
    return this.#usage.flush();
  }

  /** Everything under /v1/. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const x: Exchange = { requestId: requestIdOf(req), started: performance.now(), retries: 0, queuedMs: 0 };
    this.#serve(req, res, x).catch((e: unknown) => {
      const err = e instanceof GatewayError ? e : new GatewayError('upstream_error', 'the gateway failed on this request; see its log for the request id');
      if (!(e instanceof GatewayError)) this.#o.logger.error({ requestId: x.requestId, err: e instanceof Error ? e.stack : String(e) }, 'gateway error');
      this.#refuse(res, x, err);
    });
  }

  /** Prometheus text; behind a key, like every gateway route. */
  async metricsHandler(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const x: Exchange = { requestId: requestIdOf(req), started: performance.now(), retries: 0, queuedMs: 0 };
    try {
      await this.#o.keys.check(secretOf(req));
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': this.metrics.registry.contentType });
      res.end(text);
    } catch (e) {
      this.#refuse(res, x, e instanceof GatewayError ? e : new GatewayError('upstream_error', 'metrics failed'));
    }
  }

  async #serve(req: IncomingMessage, res: ServerResponse, x: Exchange): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    x.principal = await this.#o.keys.check(secretOf(req));
    if (req.method === 'GET' && path === '/v1/models') {
      this.#models(res, x);
      return;
    }
    if (req.method !== 'POST' || !chatPaths.has(path)) {
      throw new GatewayError('not_found', `no route ${req.method ?? ''} ${path}: the gateway serves GET /v1/models and POST /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/responses`);
    }
    const raw = await readBody(req, this.#o.maxBodyBytes ?? 16 * 1024 * 1024);
    let body: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(raw.toString('utf8'));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      body = parsed as Record<string, unknown>;
    } catch (e) {
      throw new GatewayError('invalid_json', `the body is not a JSON object (${e instanceof Error ? e.message : 'unreadable'}): send {"model": "...", ...}`);
    }
    const model = body['model'];
    if (typeof model !== 'string' || model === '') throw new GatewayError('invalid_request', 'model is required: name one of GET /v1/models', { param: 'model' });
    x.model = model;
    const colon = model.indexOf(':');
    const base = colon < 0 ? model : model.slice(0, colon);
    const adapter = colon < 0 ? undefined : model.slice(colon + 1);
    const entry = this.#entry(base, adapter, x.principal);
    if (path === '/v1/responses' && !entry.engines.some((e) => responsesEngines.has(e))) {
      throw new GatewayError('not_found', `model ${base} runs on ${entry.engines.join(', ')}, which does not serve /v1/responses: use /v1/chat/completions`);
    }
    const refusal = this.#limits.admit(x.principal.name, x.principal);
    if (refusal !== undefined) throw new GatewayError('rate_limit_exceeded', refusal.message, { retryAfterS: refusal.retryAfterS });

    const stream = body['stream'] === true;
    x.stream = stream;
    const streamOptions = body['stream_options'] as { include_usage?: unknown } | undefined;
    // Usage of a stream comes only when asked for; ask, and drop that chunk if the client did not.
    const addUsage = stream && path !== '/v1/responses' && streamOptions?.include_usage !== true;
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const tried = new Set<string>();
    const affinity = affinityKey(req, body);
    const attempts = 1 + (this.#o.retries ?? 2);
    for (let attempt = 0; attempt < attempts; attempt++) {
      let lease: Lease;
      try {
        lease = await this.router.acquire(base, { affinityKey: affinity, exclude: tried, signal: abort.signal });
      } catch (e) {
        if (e instanceof RouterError) {
          if (e.refusal.kind === 'cancelled') {
            this.#log(x, 499);
            return;
          }
          if (attempt > 0 && e.refusal.kind === 'no-replica') throw new GatewayError('upstream_error', `every replica of ${base} tried failed: ${x.error ?? 'no answer'}`);
          throw new GatewayError('no_ready_replica', e.refusal.kind === 'no-replica' ? `no replica of ${base} is ready: llmgw ctl replicas ${base} says why` : e.message, {
            retryAfterS: 'retryAfterS' in e.refusal ? e.refusal.retryAfterS : 10,
          });
        }
        throw e;
      }
      x.queuedMs += lease.queuedMs;
      tried.add(lease.replica.id);
      x.replica = lease.replica.id;
      const payload = upstreamBody(body, lease.replica, adapter, addUsage);
      const outcome = await this.#forward({ req, res, x, lease, path, payload, stripUsage: addUsage, signal: abort.signal });
      if (outcome !== 'retry') return;
      x.retries++;
      this.metrics.retries.inc({ model: base });
    }
    throw new GatewayError('upstream_error', `every replica of ${base} tried failed: ${x.error ?? 'no answer'}`);
  }

  #entry(base: string, adapter: string | undefined, principal: GatewayPrincipal): CatalogEntry {
    const entry = this.#table.models.find((m) => m.name === base);
    if (entry === undefined) {
      const names = this.#table.models.map((m) => m.name).filter((n) => principal.allowedModels === null || principal.allowedModels.includes(n));
      const near = didYouMean(base, names);
      const list = names.slice(0, 8).join(', ');
      throw new GatewayError('model_not_found', `model "${base}" does not exist${near === undefined ? '' : `; did you mean "${near}"?`}${list === '' ? '' : ` (models: ${list})`}`, { param: 'model' });
    }
    if (principal.allowedModels !== null && !principal.allowedModels.includes(base)) {
      throw new GatewayError('model_not_allowed', `key "${principal.name}" may not use model "${base}" (it may use: ${principal.allowedModels.join(', ')}); ask an admin (llmgw ctl key update)`, { param: 'model' });
    }
    if (adapter !== undefined && !entry.adapters.includes(adapter)) {
      throw new GatewayError('model_not_found', `model "${base}" has no adapter "${adapter}"${entry.adapters.length === 0 ? '' : ` (its adapters: ${entry.adapters.join(', ')})`}`, { param: 'model' });
    }
    return entry;
  }

  #models(res: ServerResponse, x: Exchange): void {
    const allowed = x.principal?.allowedModels ?? null;
    const created = Math.floor(Date.now() / 1000);
    const data: Record<string, unknown>[] = [];
    for (const m of this.#table.models) {
      if (allowed !== null && !allowed.includes(m.name)) continue;
      const ready = this.#table.replicas.filter((r) => r.model === m.name).length;
      data.push({ id: m.name, object: 'model', created, owned_by: 'llmgw', ready_replicas: ready, ...(m.context_length === undefined ? {} : { context_length: m.context_length }) });
      for (const a of m.adapters) data.push({ id: `${m.name}:${a}`, object: 'model', created, owned_by: 'llmgw', parent: m.name, ready_replicas: ready });
    }
    const text = JSON.stringify({ object: 'list', data });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-request-id': x.requestId });
    res.end(text);
  }

  /** One attempt on one replica. 'retry' when it refused or failed before any byte reached the client. */
  #forward(o: { req: IncomingMessage; res: ServerResponse; x: Exchange; lease: Lease; path: string; payload: string; stripUsage: boolean; signal: AbortSignal }): Promise<'done' | 'retry'> {
    const { req, res, x, lease } = o;
    const r = lease.replica;
    const model = x.model ?? r.model;
    return new Promise((resolve) => {
      let released = false;
      const release = (outcome: Outcome) => {
        if (released) return;
        released = true;
        lease.release(outcome);
      };
      const upstream = request(`${r.endpoint}${o.path}`, {
        method: 'POST',
        agent: this.#agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(o.payload),
          authorization: `Bearer ${r.apiKey}`,
          accept: req.headers.accept ?? '*/*',
          'x-request-id': x.requestId,
        },
      });
      const onAbort = () => {
        upstream.destroy();
        release('cancelled');
        this.#log(x, 499);
        resolve('done');
      };
      o.signal.addEventListener('abort', onAbort, { once: true });
      upstream.on('error', (e) => {
        o.signal.removeEventListener('abort', onAbort);
        if (o.signal.aborted) return;
        x.error = `${r.id}: ${e.message}`;
        release('failed');
        if (!res.headersSent) {
          resolve('retry');
          return;
        }
        // Bytes already reached the client: never sent twice; the client sees the cut.
        res.destroy();
        this.#log(x, 502);
        resolve('done');
      });
      upstream.on('response', (up) => {
        const status = up.statusCode ?? 502;
        if (status >= 500 && !res.headersSent) {
          up.resume();
          x.error = `${r.id} answered ${status}`;
          release('failed');
          o.signal.removeEventListener('abort', onAbort);
          resolve('retry');
          return;
        }
        const headers: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !hopByHop.has(k)) headers[k] = v;
        headers['x-request-id'] = x.requestId;
        // Which replica answered: for people reading a trace, and for tests of routing.
        headers['x-llmgw-replica'] = r.id;
        const sse = (up.headers['content-type'] ?? '').startsWith('text/event-stream');
        if (sse) delete headers['content-length'];
        res.writeHead(status, headers);
        x.status = status;
        const relay = sse
          ? new SseRelay({
              stripUsage: o.stripUsage,
              onToken: (gap) => {
                if (gap !== undefined) this.metrics.itl.observe({ model }, gap / 1000);
              },
            })
          : undefined;
        const decoder = sse ? new StringDecoder('utf8') : undefined;
        let tail = '';
        up.on('data', (chunk: Buffer) => {
          let ok: boolean;
          if (relay !== undefined && decoder !== undefined) {
            const out = relay.push(decoder.write(chunk));
            ok = out === '' ? true : res.write(out);
          } else {
            ok = res.write(chunk);
            // Usage is at the end of a JSON answer: keep the end to read it.
            tail = (tail + chunk.toString('latin1')).slice(-4096);
          }
          if (!ok) {
            up.pause();
            res.once('drain', () => up.resume());
          }
        });
        up.on('end', () => {
          o.signal.removeEventListener('abort', onAbort);
          if (relay !== undefined && decoder !== undefined) {
            const rest = relay.push(decoder.end()) + relay.end();
            res.end(rest);
            x.usage = relay.usage;
            if (relay.firstTokenAt !== undefined) x.ttftMs = relay.firstTokenAt - x.started;
          } else {
            res.end();
            if (status < 400) x.usage = scanUsage(tail);
          }
          release('ok');
          this.#done(x, status);
          resolve('done');
        });
        up.on('error', () => {
          o.signal.removeEventListener('abort', onAbort);
          if (o.signal.aborted) return;
          res.destroy();
          release('failed');
          this.#log(x, 502);
          resolve('done');
        });
      });
      upstream.end(o.payload);
    });
  }

  #done(x: Exchange, status: number): void {
    const key = x.principal?.name ?? '-';
    const model = x.model ?? '-';
    const prompt = x.usage?.prompt ?? 0;
    const completion = x.usage?.completion ?? 0;
    this.#usage.record({ key, model, prompt, completion });
    if (x.principal !== undefined) this.#limits.charge(key, prompt + completion, x.principal);
    if (prompt > 0) this.metrics.tokens.inc({ model, key, kind: 'prompt' }, prompt);
    if (completion > 0) this.metrics.tokens.inc({ model, key, kind: 'completion' }, completion);
    if (x.ttftMs !== undefined) this.metrics.ttft.observe({ model }, x.ttftMs / 1000);
    this.#log(x, status);
  }

  #refuse(res: ServerResponse, x: Exchange, e: GatewayError): void {
    sendError(res, e, x.requestId);
    x.error = e.message;
    this.metrics.errors.inc({ model: x.model ?? '-', key: x.principal?.name ?? '-', code: e.code });
    this.#log(x, e.status);
  }

  #log(x: Exchange, status: number): void {
    const ms = performance.now() - x.started;
    const model = x.model ?? '-';
    this.metrics.requests.inc({ model, key: x.principal?.name ?? '-', status: String(status) });
    this.metrics.duration.observe({ model }, ms / 1000);
    this.#o.logger.info(
      {
        requestId: x.requestId,
        key: x.principal?.name,
        model: x.model,
        replica: x.replica,
        status,
        ms: Math.round(ms * 10) / 10,
        ...(x.ttftMs === undefined ? {} : { ttftMs: Math.round(x.ttftMs * 10) / 10 }),
        ...(x.queuedMs > 0 ? { queuedMs: Math.round(x.queuedMs) } : {}),
        ...(x.retries > 0 ? { retries: x.retries } : {}),
        ...(x.stream === undefined ? {} : { stream: x.stream }),
        ...(x.usage === undefined ? {} : { promptTokens: x.usage.prompt, completionTokens: x.usage.completion }),
        ...(x.error === undefined ? {} : { error: x.error }),
      },
      'gateway request',
    );
  }
}

function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID();
}

function secretOf(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth !== undefined) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m?.[1];
  }
  const key = req.headers['x-api-key'];
  return typeof key === 'string' && key !== '' ? key : undefined;
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(tooLarge(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError('request_too_large', `the request body is over ${Math.round(limit / 1024 / 1024)} MiB: send a smaller one (images as URLs rather than inline), or raise gateway.max_body_mb`);
}

/** The body as this replica's engine takes it: its name for the model, the adapter, usage asked for. */
export function upstreamBody(body: Record<string, unknown>, replica: RouteReplica, adapter: string | undefined, addUsage: boolean): string {
  const out: Record<string, unknown> = { ...body, model: replica.servedName };
  if (adapter !== undefined) {
    if (replica.engine === 'llamacpp') {
      // llama.cpp loads adapters at scale 0 and applies them per request by position.
      out['lora'] = [{ id: replica.adapters.indexOf(adapter), scale: 1 }];
    } else {
      out['model'] = adapter;
    }
  }
  if (addUsage) out['stream_options'] = { ...(body['stream_options'] as Record<string, unknown> | undefined), include_usage: true };
  return JSON.stringify(out);
}

/**
 * Which conversation a request belongs to: the client's `x-session-id`, else a hash of
 * what starts it (system prompt and first message, or the prompt's start), so a
 * conversation's next turn finds the replica whose prefix cache holds it.
 */
export function affinityKey(req: IncomingMessage, body: Record<string, unknown>): string | undefined {
  const session = req.headers['x-session-id'];
  if (typeof session === 'string' && session !== '') return `s:${session}`;
  const messages = body['messages'];
  if (Array.isArray(messages) && messages.length > 0) return `m:${fnv1a(JSON.stringify(messages.slice(0, 2)))}`;
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
