import http from 'node:http';
import https from 'node:https';

import { redact } from '../../core/redact.js';
import { certificateProblem } from '../../http1/upstream-pool.js';

import { parseLoad } from './prometheus.js';
import type { LoadReading, RouteReplica, ScrapeFailureKind } from './types.js';

/** What a scrape needs of a replica. */
export type ScrapeTarget = Pick<RouteReplica, 'id' | 'metricsUrl' | 'apiKey' | 'loadMetrics'>;

export interface MetricsAnswer {
  status: number;
  body: string;
}

export interface MetricsGetOptions {
  apiKey: string;
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * GETs a metrics page. Rejects with the socket's error (its `code`, such as
 * `ECONNREFUSED`, says whether the replica is unreachable), `ETIMEDOUT` past the timeout.
 */
export type MetricsGet = (url: string, options: MetricsGetOptions) => Promise<MetricsAnswer>;

export interface ScraperOptions {
  onReading: (id: string, reading: LoadReading) => void;
  onFailure: (id: string, error: string, kind: ScrapeFailureKind) => void;
  /** Time from one scrape's start to the next one's (default 250 ms). */
  intervalMs?: number;
  /** A scrape not answered by then fails (default 1 s). */
  timeoutMs?: number;
  /** The router's clock, which stamps readings. */
  now?: () => number;
  /** Replaces the HTTP client (tests). */
  get?: MetricsGet;
}

/** Keep-alive: four scrapes a second per replica should not each open a connection. */
const keepAlive = { keepAlive: true, maxSockets: 2, maxFreeSockets: 1 };

/** Socket errors that mean nothing listens there: the replica's breaker opens. */
const unreachableCodes = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENOTFOUND']);

/** vLLM's page with histograms is a few hundred KiB; anything far past that is not metrics. */
const maxBodyChars = 16 * 1024 * 1024;

interface Target {
  id: string;
  url: string;
  apiKey: string;
  names: ScrapeTarget['loadMetrics'];
  timer: NodeJS.Timeout | undefined;
  /** The scrape in flight, if any: one at a time per replica. */
  inFlight: AbortController | undefined;
  gone: boolean;
}

/**
 * Reads every replica's load from its own metrics, each on its own loop: a scrape starts
 * `intervalMs` after the previous one started (or at once when that one took longer), so a
 * slow replica delays only itself.
 */
export class Scraper {
  readonly #onReading: ScraperOptions['onReading'];
  readonly #onFailure: ScraperOptions['onFailure'];
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #get: MetricsGet;
  #agents: { http: http.Agent; https: https.Agent } | undefined;
  #ca: string | undefined;
  readonly #targets = new Map<string, Target>();
  #stopped = false;

  constructor(options: ScraperOptions) {
    this.#onReading = options.onReading;
    this.#onFailure = options.onFailure;
    this.#intervalMs = options.intervalMs ?? 250;
    this.#timeoutMs = options.timeoutMs ?? 1000;
    this.#now = options.now ?? (() => performance.now());
    if (options.get) {
      this.#get = options.get;
    } else {
      const agents = { http: new http.Agent(keepAlive), https: new https.Agent(keepAlive) };
      this.#agents = agents;
      this.#get = (url, getOptions) => httpGet(url, getOptions, this.#agents ?? agents);
    }
  }

  /**
   * The CA (PEM) that https:// metrics (a node's engine proxy) must chain to; unset, the
   * system's. A new one takes effect on new connections.
   */
  setCa(ca: string | undefined): void {
    if (ca === this.#ca || this.#agents === undefined) return;
    this.#ca = ca;
    const old = this.#agents.https;
    this.#agents = {
      http: this.#agents.http,
      https: new https.Agent({ ...keepAlive, ...(ca === undefined ? {} : { ca }) }),
    };
    old.destroy();
  }

  /** The replicas to scrape: new ones are scraped at once, missing ones no more. */
  setReplicas(replicas: readonly ScrapeTarget[]): void {
    if (this.#stopped) return;
    const seen = new Set<string>();
    for (const r of replicas) {
      seen.add(r.id);
      const known = this.#targets.get(r.id);
      if (known) {
        known.url = r.metricsUrl;
        known.apiKey = r.apiKey;
        known.names = r.loadMetrics;
        continue;
      }
      const target: Target = {
        id: r.id,
        url: r.metricsUrl,
        apiKey: r.apiKey,
        names: r.loadMetrics,
        timer: undefined,
        inFlight: undefined,
        gone: false,
      };
      this.#targets.set(r.id, target);
      void this.#scrape(target);
    }
    for (const [id, target] of this.#targets) {
      if (seen.has(id)) continue;
      this.#targets.delete(id);
      this.#drop(target);
    }
  }

  /** Ends every loop and closes the connections. */
  stop(): void {
    this.#stopped = true;
    for (const target of this.#targets.values()) this.#drop(target);
    this.#targets.clear();
    this.#agents?.http.destroy();
    this.#agents?.https.destroy();
  }

  #drop(target: Target): void {
    target.gone = true;
    clearTimeout(target.timer);
    target.inFlight?.abort();
  }

  async #scrape(target: Target): Promise<void> {
    target.timer = undefined;
    const started = this.#now();
    const controller = new AbortController();
    target.inFlight = controller;
    const { url, names } = target;
    let answer: MetricsAnswer | undefined;
    let failure: { error: string; kind: ScrapeFailureKind } | undefined;
    try {
      answer = await this.#get(url, {
        apiKey: target.apiKey,
        timeoutMs: this.#timeoutMs,
        signal: controller.signal,
      });
    } catch (error) {
      failure = describeError(url, error);
    }
    target.inFlight = undefined;
    if (target.gone) return;
    try {
      if (answer) {
        const load = answer.status === 200 ? parseLoad(answer.body, names) : undefined;
        if (load) {
          this.#onReading(target.id, { ...load, at: this.#now() });
        } else if (answer.status !== 200) {
          failure = describeStatus(url, answer.status);
        } else {
          failure = {
            error: `metrics at ${redact(url)} have no ${names.running} or no ${names.waiting}`,
            kind: 'no-metrics',
          };
        }
      }
      if (failure) this.#onFailure(target.id, failure.error, failure.kind);
    } finally {
      // Still scraped: neither removed nor stopped while the callbacks ran.
      if (this.#targets.get(target.id) === target) {
        const wait = Math.max(0, this.#intervalMs - (this.#now() - started));
        target.timer = setTimeout(() => void this.#scrape(target), wait);
        target.timer.unref();
      }
    }
  }
}

function describeError(url: string, error: unknown): { error: string; kind: ScrapeFailureKind } {
  const code = (error as { code?: unknown } | null)?.code;
  const raw = error instanceof Error ? error.message : String(error);
  const why = certificateProblem(typeof code === 'string' ? code : undefined, true);
  const message = why === undefined ? raw : `${why} (${raw})`;
  const kind: ScrapeFailureKind =
    typeof code === 'string' && unreachableCodes.has(code)
      ? 'unreachable'
      : code === 'ETIMEDOUT'
        ? 'timeout'
        : 'status';
  return { error: redact(`metrics at ${url}: ${message}`), kind };
}

function describeStatus(url: string, status: number): { error: string; kind: ScrapeFailureKind } {
  const where = `metrics at ${redact(url)} answered ${status}`;
  if (status === 401 || status === 403)
    return { error: `${where}: the replica does not take its key`, kind: 'status' };
  // llama-server without --metrics answers 501.
  if (status === 501 || status === 404)
    return { error: `${where}: the engine runs without its metrics`, kind: 'no-metrics' };
  return { error: where, kind: 'status' };
}

function httpGet(
  url: string,
  options: MetricsGetOptions,
  agents: { http: http.Agent; https: https.Agent },
): Promise<MetricsAnswer> {
  return new Promise((resolve, reject) => {
    const secure = url.startsWith('https:');
    const request = (secure ? https : http).request(url, {
      agent: secure ? agents.https : agents.http,
      headers: { authorization: `Bearer ${options.apiKey}`, accept: 'text/plain' },
      signal: options.signal,
    });
    const timer = setTimeout(() => {
      request.destroy(
        Object.assign(new Error(`no answer in ${options.timeoutMs} ms`), { code: 'ETIMEDOUT' }),
      );
    }, options.timeoutMs);
    timer.unref();
    const fail = (error: Error): void => {
      clearTimeout(timer);
      reject(error);
    };
    request.on('error', fail);
    request.on('response', (response) => {
      response.setEncoding('utf8');
      let body = '';
      response.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > maxBodyChars) request.destroy(new Error(`more than ${maxBodyChars} characters`));
      });
      response.on('error', fail);
      response.on('end', () => {
        clearTimeout(timer);
        resolve({ status: response.statusCode ?? 0, body });
      });
    });
    request.end();
  });
}
