import { Counter, Gauge, Histogram, Registry } from 'prom-client';

import type { ReplicaLoad } from './router/types.js';

/**
 * The gateway's Prometheus metrics. Per-request ones are labelled by model, key name and
 * status (bounded sets: catalog models, keys); per-replica ones are filled in when
 * scraped, from the router's view.
 */
type Observer = { observe: (v: number) => void };
type Incrementer = { inc: (v?: number) => void };

export class GatewayMetrics {
  readonly registry = new Registry();
  // Labelled children, made once per label set: prom-client hashes the labels on every
  // call otherwise, which shows on the per-request path.
  readonly #children = new Map<string, Observer | Incrementer>();
  readonly requests: Counter<'model' | 'key' | 'status'>;
  readonly errors: Counter<'model' | 'key' | 'code'>;
  readonly duration: Histogram<'model'>;
  readonly ttft: Histogram<'model'>;
  readonly itl: Histogram<'model'>;
  readonly tokens: Counter<'model' | 'key' | 'kind'>;
  readonly retries: Counter<'model'>;

  /** A request answered (or refused): its count by status, and its duration. */
  answered(model: string, key: string, status: number, seconds: number): void {
    this.#counter(`r\u0000${model}\u0000${key}\u0000${status}`, () => this.requests.labels(model, key, String(status))).inc();
    this.#observer(`d\u0000${model}`, () => this.duration.labels(model)).observe(seconds);
  }

  countTokens(model: string, key: string, prompt: number, completion: number): void {
    if (prompt > 0) this.#counter(`tp\u0000${model}\u0000${key}`, () => this.tokens.labels(model, key, 'prompt')).inc(prompt);
    if (completion > 0) this.#counter(`tc\u0000${model}\u0000${key}`, () => this.tokens.labels(model, key, 'completion')).inc(completion);
  }

  ttftFor(model: string): Observer {
    return this.#observer(`t\u0000${model}`, () => this.ttft.labels(model));
  }

  itlFor(model: string): Observer {
    return this.#observer(`i\u0000${model}`, () => this.itl.labels(model));
  }

  retry(model: string): void {
    this.#counter(`x\u0000${model}`, () => this.retries.labels(model)).inc();
  }

  #observer(id: string, make: () => Observer): Observer {
    let c = this.#children.get(id) as Observer | undefined;
    if (c === undefined) {
      c = make();
      this.#children.set(id, c);
    }
    return c;
  }

  #counter(id: string, make: () => Incrementer): Incrementer {
    let c = this.#children.get(id) as Incrementer | undefined;
    if (c === undefined) {
      c = make();
      this.#children.set(id, c);
    }
    return c;
  }

  constructor(loads: () => ReplicaLoad[], queued: (model?: string) => number) {
    const registers = [this.registry];
    this.requests = new Counter({ name: 'llmgw_gateway_requests_total', help: 'Requests answered, by model, key name and HTTP status', labelNames: ['model', 'key', 'status'], registers });
    this.errors = new Counter({ name: 'llmgw_gateway_errors_total', help: 'Requests refused or failed, by model, key name and error code', labelNames: ['model', 'key', 'code'], registers });
    this.duration = new Histogram({
      name: 'llmgw_gateway_request_duration_seconds',
      help: 'Whole requests, from arrival to the last byte',
      labelNames: ['model'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.ttft = new Histogram({
      name: 'llmgw_gateway_time_to_first_token_seconds',
      help: 'From arrival to the first token of a streamed answer',
      labelNames: ['model'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.itl = new Histogram({
      name: 'llmgw_gateway_inter_token_latency_seconds',
      help: 'Between tokens of a streamed answer',
      labelNames: ['model'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.tokens = new Counter({ name: 'llmgw_gateway_tokens_total', help: 'Tokens, by model, key name and kind (prompt, completion)', labelNames: ['model', 'key', 'kind'], registers });
    this.retries = new Counter({ name: 'llmgw_gateway_retries_total', help: 'Requests sent again to another replica (refused, or 5xx before the first byte)', labelNames: ['model'], registers });
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
