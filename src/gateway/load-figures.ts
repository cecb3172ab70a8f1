import type { Logger } from 'pino';

import type { GatewayLoadReport, ModelLoadFigures, ScaleSignals } from '../protocol/load-report.js';

import type { ReplicaLoad } from './router/types.js';

/** What the gateway knows of its models' load now, for one report. */
export interface LoadSources {
  /** The gateway's name in its reports. */
  gateway: string;
  /** Catalog models (every one is reported, the idle ones too: the autoscaler scales them down). */
  catalog: Iterable<string>;
  /** The router's replicas. */
  loads: readonly ReplicaLoad[];
  /** Requests queued in the router for a free replica. */
  queued: (model: string) => number;
  /** Requests waiting in the waiting room for a replica to start. */
  waiting: (model: string) => number;
  inFlight: (model: string) => number;
}

/**
 * Requests taken per catalog model, when the last came, and the last cold start: the
 * figures of the load report the router does not keep.
 */
export class ModelDemand {
  readonly #demand = new Map<string, { requests: number; lastAt: number }>();
  readonly #coldStarts = new Map<string, { ms: number; at: number }>();

  /** A request named the model (counted whether it is then served, waits or is refused). */
  requested(model: string, at = Date.now()): void {
    const d = this.#demand.get(model);
    if (d === undefined) {
      this.#demand.set(model, { requests: 1, lastAt: at });
    } else {
      d.requests++;
      d.lastAt = at;
    }
  }

  coldStart(model: string, ms: number, at = Date.now()): void {
    this.#coldStarts.set(model, { ms: Math.round(ms), at });
  }

  report(s: LoadSources, at = Date.now()): GatewayLoadReport {
    const replicas = new Map<string, ModelLoadFigures['replicas']>();
    for (const l of s.loads) {
      let list = replicas.get(l.model);
      if (list === undefined) replicas.set(l.model, (list = []));
      list.push({
        id: l.id,
        running: l.reading?.running ?? 0,
        waiting: l.reading?.waiting ?? 0,
        ...(l.reading?.kvUsage === undefined ? {} : { kvUsage: l.reading.kvUsage }),
        capacity: l.capacity ?? 1,
        inFlight: l.inFlight,
        stale: l.stale,
      });
    }
    const names = new Set([...s.catalog, ...replicas.keys()]);
    const models: ModelLoadFigures[] = [];
    for (const model of names) {
      const demand = this.#demand.get(model);
      const cold = this.#coldStarts.get(model);
      models.push({
        model,
        queued: s.queued(model) + s.waiting(model),
        inFlight: s.inFlight(model),
        requests: demand?.requests ?? 0,
        ...(demand === undefined ? {} : { lastRequestAt: demand.lastAt }),
        ...(cold === undefined ? {} : { coldStart: { ...cold } }),
        replicas: replicas.get(model) ?? [],
      });
    }
    return { gateway: s.gateway, at, models };
  }
}

/**
 * Sends a report every `everyMs` (one at a time: a slow control plane is not asked twice);
 * a failure is logged once until one goes through. Returns the stop.
 */
export function sendReports(o: {
  signals: ScaleSignals;
  build: () => GatewayLoadReport;
  everyMs: number;
  logger: Logger;
}): () => void {
  let sending = false;
  let failing = false;
  const timer = setInterval(() => {
    if (sending) return;
    sending = true;
    Promise.resolve()
      .then(() => o.signals.report(o.build()))
      .then(
        () => {
          if (failing) o.logger.info('load reports reach the control plane again');
          failing = false;
        },
        (e: unknown) => {
          if (!failing)
            o.logger.warn(
              { err: e instanceof Error ? e.message : String(e) },
              'load report not sent; the autoscaler sees this gateway’s last one until one is',
            );
          failing = true;
        },
      )
      .finally(() => {
        sending = false;
      });
  }, o.everyMs);
  timer.unref();
  return () => {
    clearInterval(timer);
  };
}
