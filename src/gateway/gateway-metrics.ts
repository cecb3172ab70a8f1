import { Counter, Registry } from 'prom-client';

import type { CatalogEntry } from '../protocol/routes.js';
import type { GatewayCounts, ModelCounts } from '../protocol/traffic-views.js';

import { liveGauges } from './gateway-gauges.js';
import { CounterTable, HistogramTable, type CounterCell, type HistogramCell } from './metric-tables.js';

import type { ReplicaLoad } from './router/types.js';

/** The model label of what a client asked for that is not in the catalog. */
export const unknownModel = 'unknown';
/** The label of what a request never got to: a model before its body was read, a key that was not valid. */
export const none = '-';

/**
 * Label values from bounded sets only: whatever a client sends becomes at most one more
 * series, never one per value (each series stays in memory and in every scrape).
 */
export class MetricLabels {
  #known = new Set<string>();

  /** The catalog's models, and their adapters as `MODEL:ADAPTER`. */
  setCatalog(models: readonly CatalogEntry[]): void {
    const known = new Set<string>();
    for (const m of models) {
      known.add(m.name);
      for (const a of m.adapters) known.add(`${m.name}:${a}`);
    }
    this.#known = known;
  }

  /** A model of the catalog as itself; anything else (a typo, a megabyte) as `unknown`. */
  model(name: string | undefined): string {
    if (name === undefined) return none;
    return this.#known.has(name) ? name : unknownModel;
  }

  /** Key names come from the store (only a key that was found has a name). */
  key(name: string | undefined): string {
    return name ?? none;
  }

  /** HTTP's status codes; anything outside them (a broken engine) as `other`. */
  status(status: number): string {
    return Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : 'other';
  }
}

/**
 * The gateway's Prometheus metrics. Per-request ones are labelled by model, key name and
 * status (bounded sets: catalog models, keys, HTTP statuses; see MetricLabels) and kept in
 * tables the request path adds to directly (metric-tables.ts); per-replica ones are filled
 * in when scraped, from the router's view.
 */
type Observer = { observe: (v: number) => void };

/** Seconds, ascending (HistogramTable sorts its buckets; these are sorted already). */
const ttftBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Everything one (model, key) pair counts, found once per request. */
interface Account {
  key: string;
  statuses: Map<string, CounterCell>;
  prompt: CounterCell;
  completion: CounterCell;
}

/** Per model. */
interface ModelCells {
  label: string;
  duration: HistogramCell;
  ttft: HistogramCell;
  itl: HistogramCell;
  retries: CounterCell;
  keys: Map<string, Account>;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly labels = new MetricLabels();
  readonly #models = new Map<string, ModelCells>();
  readonly requests: CounterTable;
  readonly errors: Counter<'model' | 'key' | 'code'>;
  readonly duration: HistogramTable;
  readonly ttft: HistogramTable;
  readonly itl: HistogramTable;
  readonly tokens: CounterTable;
  readonly retries: CounterTable;
  /** From a request entering the waiting room (its model at zero) to its first token, or its answer when not streamed. */
  readonly coldStart: HistogramTable;

  /** Serves another part's metrics (the control plane's autoscaler) on this same /metrics. */
  include(other: Registry): void {
    for (const { name } of other.getMetricsAsArray()) {
      const metric = other.getSingleMetric(name);
      if (metric !== undefined) this.registry.registerMetric(metric);
    }
  }

  /** The catalog's models and adapters: the model labels there are (anything else is `unknown`). */
  setCatalog(models: readonly CatalogEntry[]): void {
    this.labels.setCatalog(models);
  }

  /** A request answered (or refused): its count by status, and its duration. */
  answered(model: string | undefined, key: string | undefined, status: number, seconds: number): void {
    const m = this.#model(model);
    const a = this.#account(m, this.labels.key(key));
    const s = this.labels.status(status);
    let cell = a.statuses.get(s);
    if (cell === undefined) {
      cell = this.requests.cell(`${m.label}\u0000${a.key}\u0000${s}`, () => ({
        model: m.label,
        key: a.key,
        status: s,
      }));
      a.statuses.set(s, cell);
    }
    cell.value++;
    m.duration.observe(seconds);
  }

  /** A request refused (by the gateway, or the engine: `engine_refused`), by its error code. */
  refused(model: string | undefined, key: string | undefined, code: string): void {
    this.errors.inc({ model: this.labels.model(model), key: this.labels.key(key), code });
  }

  countTokens(model: string | undefined, key: string | undefined, prompt: number, completion: number): void {
    const a = this.#account(this.#model(model), this.labels.key(key));
    a.prompt.value += prompt;
    a.completion.value += completion;
  }

  ttftFor(model: string | undefined): Observer {
    return this.#model(model).ttft;
  }

  itlFor(model: string | undefined): Observer {
    return this.#model(model).itl;
  }

  /** A cold start: seconds from entering the waiting room to the first token (or the whole answer). */
  coldStarted(model: string, seconds: number): void {
    const label = this.labels.model(model);
    this.coldStart.cell(label, () => ({ model: label })).observe(seconds);
  }

  /** Every model's counters as they stand (the control plane samples them for its traffic series). */
  counts(): GatewayCounts {
    const out = new Map<string, ModelCounts>();
    for (const [label, m] of this.#models) {
      let requests = 0;
      let errors = 0;
      let prompt = 0;
      let completion = 0;
      for (const a of m.keys.values()) {
        prompt += a.prompt.value;
        completion += a.completion.value;
        for (const [status, cell] of a.statuses) {
          requests += cell.value;
          if (status === 'other' || Number(status) >= 400) errors += cell.value;
        }
      }
      const counted = m.ttft.counts.reduce((x, n) => x + n, 0);
      out.set(label, {
        requests,
        errors,
        prompt_tokens: prompt,
        completion_tokens: completion,
        ttft: { bounds: ttftBuckets, counts: [...m.ttft.counts, m.ttft.count - counted] },
      });
    }
    return out;
  }

  retry(model: string | undefined): void {
    this.#model(model).retries.value++;
  }

  #model(name: string | undefined): ModelCells {
    const model = this.labels.model(name);
    let m = this.#models.get(model);
    if (m === undefined) {
      const labels = () => ({ model });
      m = {
        label: model,
        duration: this.duration.cell(model, labels),
        ttft: this.ttft.cell(model, labels),
        itl: this.itl.cell(model, labels),
        retries: this.retries.cell(model, labels),
        keys: new Map(),
      };
      this.#models.set(model, m);
    }
    return m;
  }

  #account(m: ModelCells, key: string): Account {
    const model = m.label;
    let a = m.keys.get(key);
    if (a === undefined) {
      a = {
        key,
        statuses: new Map(),
        prompt: this.tokens.cell(`${model}\u0000${key}\u0000prompt`, () => ({ model, key, kind: 'prompt' })),
        completion: this.tokens.cell(`${model}\u0000${key}\u0000completion`, () => ({
          model,
          key,
          kind: 'completion',
        })),
      };
      m.keys.set(key, a);
    }
    return a;
  }

  /** `waiting`: requests in the waiting room by model (models scaled to zero). */
  constructor(
    loads: () => ReplicaLoad[],
    queued: (model?: string) => number,
    waiting: () => ReadonlyMap<string, number> = () => new Map(),
  ) {
    const registers = [this.registry];
    this.requests = new CounterTable({
      name: 'llmgw_gateway_requests_total',
      help: 'Requests answered, by model, key name and HTTP status',
      registers,
    });
    this.errors = new Counter({
      name: 'llmgw_gateway_errors_total',
      help: 'Requests refused or failed, by model, key name and error code',
      labelNames: ['model', 'key', 'code'],
      registers,
    });
    this.duration = new HistogramTable({
      name: 'llmgw_gateway_request_duration_seconds',
      help: 'Whole requests, from arrival to the last byte',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.ttft = new HistogramTable({
      name: 'llmgw_gateway_time_to_first_token_seconds',
      help: 'From arrival to the first token of a streamed answer',
      buckets: ttftBuckets,
      registers,
    });
    this.itl = new HistogramTable({
      name: 'llmgw_gateway_inter_token_latency_seconds',
      help: 'Between tokens of a streamed answer',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.tokens = new CounterTable({
      name: 'llmgw_gateway_tokens_total',
      help: 'Tokens, by model, key name and kind (prompt, completion)',
      registers,
    });
    this.retries = new CounterTable({
      name: 'llmgw_gateway_retries_total',
      help: 'Requests sent again to another replica (it refused the connection, or failed before the first byte)',
      registers,
    });
    this.coldStart = new HistogramTable({
      name: 'llmgw_gateway_cold_start_seconds',
      help: 'From a request for a model scaled to zero entering the waiting room to its first token (or its whole answer, not streamed)',
      buckets: [0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 180, 300, 600],
      registers,
    });
    liveGauges(registers, { loads, queued, waiting });
  }
}
