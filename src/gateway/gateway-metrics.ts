import { Counter, Gauge, Registry } from 'prom-client';

import { CounterTable, HistogramTable, type CounterCell, type HistogramCell } from './metric-tables.js';

import type { ReplicaLoad } from './router/types.js';

/**
 * The gateway's Prometheus metrics. Per-request ones are labelled by model, key name and
 * status (bounded sets: catalog models, keys) and kept in tables the request path adds to
 * directly (metric-tables.ts); per-replica ones are filled in when scraped, from the
 * router's view.
 */
type Observer = { observe: (v: number) => void };

/** Everything one (model, key) pair counts, found once per request. */
interface Account {
  statuses: Map<number, CounterCell>;
  prompt: CounterCell;
  completion: CounterCell;
}

/** Per model. */
interface ModelCells {
  duration: HistogramCell;
  ttft: HistogramCell;
  itl: HistogramCell;
  retries: CounterCell;
  keys: Map<string, Account>;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #models = new Map<string, ModelCells>();
  readonly requests: CounterTable;
  readonly errors: Counter<'model' | 'key' | 'code'>;
  readonly duration: HistogramTable;
  readonly ttft: HistogramTable;
  readonly itl: HistogramTable;
  readonly tokens: CounterTable;
  readonly retries: CounterTable;

  /** A request answered (or refused): its count by status, and its duration. */
  answered(model: string, key: string, status: number, seconds: number): void {
    const m = this.#model(model);
    const a = this.#account(m, model, key);
    let cell = a.statuses.get(status);
    if (cell === undefined) {
      cell = this.requests.cell(`${model}\u0000${key}\u0000${status}`, () => ({ model, key, status: String(status) }));
      a.statuses.set(status, cell);
    }
    cell.value++;
    m.duration.observe(seconds);
  }

  countTokens(model: string, key: string, prompt: number, completion: number): void {
    const a = this.#account(this.#model(model), model, key);
    a.prompt.value += prompt;
    a.completion.value += completion;
  }

  ttftFor(model: string): Observer {
    return this.#model(model).ttft;
  }

  itlFor(model: string): Observer {
    return this.#model(model).itl;
  }

  retry(model: string): void {
    this.#model(model).retries.value++;
  }

  #model(model: string): ModelCells {
    let m = this.#models.get(model);
    if (m === undefined) {
      const labels = () => ({ model });
      m = {
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

  #account(m: ModelCells, model: string, key: string): Account {
    let a = m.keys.get(key);
    if (a === undefined) {
      a = {
        statuses: new Map(),
        prompt: this.tokens.cell(`${model}\u0000${key}\u0000prompt`, () => ({ model, key, kind: 'prompt' })),
        completion: this.tokens.cell(`${model}\u0000${key}\u0000completion`, () => ({ model, key, kind: 'completion' })),
      };
      m.keys.set(key, a);
    }
    return a;
  }

  constructor(loads: () => ReplicaLoad[], queued: (model?: string) => number) {
    const registers = [this.registry];
    this.requests = new CounterTable({ name: 'llmgw_gateway_requests_total', help: 'Requests answered, by model, key name and HTTP status', registers });
    this.errors = new Counter({ name: 'llmgw_gateway_errors_total', help: 'Requests refused or failed, by model, key name and error code', labelNames: ['model', 'key', 'code'], registers });
    this.duration = new HistogramTable({
      name: 'llmgw_gateway_request_duration_seconds',
      help: 'Whole requests, from arrival to the last byte',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.ttft = new HistogramTable({
      name: 'llmgw_gateway_time_to_first_token_seconds',
      help: 'From arrival to the first token of a streamed answer',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.itl = new HistogramTable({
      name: 'llmgw_gateway_inter_token_latency_seconds',
      help: 'Between tokens of a streamed answer',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.tokens = new CounterTable({ name: 'llmgw_gateway_tokens_total', help: 'Tokens, by model, key name and kind (prompt, completion)', registers });
    this.retries = new CounterTable({ name: 'llmgw_gateway_retries_total', help: 'Requests sent again to another replica (refused, or 5xx before the first byte)', registers });
    new Gauge({
      name: 'llmgw_gateway_in_flight',
      help: 'Requests being answered now, by model',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const l of loads()) this.inc({ model: l.model }, l.inFlight);
      },
    });
    new Gauge({
      name: 'llmgw_gateway_queued',
      help: 'Requests waiting for a free replica, by model',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const model of new Set(loads().map((l) => l.model))) this.set({ model }, queued(model));
      },
    });
    new Gauge({
      name: 'llmgw_gateway_replica_load',
      help: "Each replica's load as last scraped from the engine (running, waiting, kv_usage) and the gateway's own in-flight count",
      labelNames: ['replica', 'model', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const l of loads()) {
          this.set({ replica: l.id, model: l.model, kind: 'in_flight' }, l.inFlight);
          this.set({ replica: l.id, model: l.model, kind: 'score' }, l.score);
          if (l.reading === undefined) continue;
          this.set({ replica: l.id, model: l.model, kind: 'running' }, l.reading.running);
          this.set({ replica: l.id, model: l.model, kind: 'waiting' }, l.reading.waiting);
          if (l.reading.kvUsage !== undefined) this.set({ replica: l.id, model: l.model, kind: 'kv_usage' }, l.reading.kvUsage);
        }
      },
    });
    new Gauge({
      name: 'llmgw_gateway_replica_state',
      help: 'Each replica: 1 for its breaker state (closed, open, half-open) and whether its metrics are stale',
      labelNames: ['replica', 'model', 'state'],
      registers,
      collect() {
        this.reset();
        for (const l of loads()) {
          this.set({ replica: l.id, model: l.model, state: l.breaker }, 1);
          if (l.stale) this.set({ replica: l.id, model: l.model, state: 'stale' }, 1);
        }
      },
    });
  }
}
