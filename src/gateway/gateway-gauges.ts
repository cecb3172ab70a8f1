import { Gauge, type Registry } from 'prom-client';

import type { ReplicaLoad } from './router/types.js';

/**
 * The gateway's gauges read when /metrics is scraped, not kept: the waiting room, requests in
 * flight and queued, and each replica's load and breaker state, from the router's own view.
 */
export function liveGauges(
  registers: Registry[],
  from: {
    loads: () => ReplicaLoad[];
    queued: (model?: string) => number;
    waiting: () => ReadonlyMap<string, number>;
  },
): void {
  const { loads, queued, waiting } = from;
  new Gauge({
    name: 'llmgw_gateway_waiting_room',
    help: 'Requests waiting for a replica of a model scaled to zero to start, by model',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const [model, n] of waiting()) this.set({ model }, n);
    },
  });
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
  replicaGauges(registers, loads);
}

/** Each replica's load and breaker state, as the router sees them. */
function replicaGauges(registers: Registry[], loads: () => ReplicaLoad[]): void {
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
        if (l.reading.kvUsage !== undefined)
          this.set({ replica: l.id, model: l.model, kind: 'kv_usage' }, l.reading.kvUsage);
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
