import type { GatewayCounts, TrafficPoint, TrafficView } from '../../protocol/traffic-views.js';

import { pointBetween, sumCounts } from './traffic-point.js';

/** The label of requests that never named a model (gateway-metrics.ts `none`): in the total only. */
const noModel = '-';

export interface TrafficSamplerOptions {
  /** Seconds between samples; 10 unless given (tests sample faster). */
  stepMs?: number;
  /** Points kept: 360 steps of 10 s, an hour. */
  capacity?: number;
  now?: () => number;
  /** Told after each point is added (the console's overview follows it as the `traffic` event). */
  onSample?: () => void;
}

/**
 * The gateway's traffic over the last hour, for the console's overview: every step the
 * gateway's counters are read and their growth kept as rates, in a ring of points per model
 * and in total. In memory: a restarted control plane starts a new hour.
 */
export class TrafficSampler {
  readonly #stepMs: number;
  readonly #capacity: number;
  readonly #now: () => number;
  readonly #onSample: (() => void) | undefined;
  #source: (() => GatewayCounts) | undefined;
  #last: { at: number; counts: GatewayCounts } | undefined;
  #total: TrafficPoint[] = [];
  readonly #models = new Map<string, TrafficPoint[]>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: TrafficSamplerOptions = {}) {
    this.#stepMs = options.stepMs ?? 10_000;
    this.#capacity = options.capacity ?? 360;
    this.#now = options.now ?? Date.now;
    this.#onSample = options.onSample;
  }

  /** Samples this gateway's counters from now on (the gateway in this process). */
  attach(source: () => GatewayCounts): void {
    this.#source = source;
    this.#last = undefined;
    this.sample();
    this.#timer ??= setInterval(() => this.sample(), this.#stepMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Reads the counters and adds a point of their growth since the last reading. */
  sample(): void {
    if (this.#source === undefined) return;
    const at = this.#now();
    const counts = this.#source();
    const last = this.#last;
    this.#last = { at, counts };
    if (last === undefined || at <= last.at) return;
    const o = { seconds: (at - last.at) / 1000, t: new Date(at).toISOString() };
    this.#total = this.#push(
      this.#total,
      pointBetween(sumCounts(last.counts.values()), sumCounts(counts.values()), o),
    );
    for (const [model, c] of counts) {
      if (model === noModel) continue;
      this.#models.set(
        model,
        this.#push(this.#models.get(model) ?? [], pointBetween(last.counts.get(model), c, o)),
      );
    }
    this.#onSample?.();
  }

  view(): TrafficView {
    return {
      step_s: this.#stepMs / 1000,
      gateway: this.#source !== undefined,
      points: [...this.#total],
      models: Object.fromEntries([...this.#models].map(([m, points]) => [m, [...points]])),
    };
  }

  #push(points: TrafficPoint[], p: TrafficPoint): TrafficPoint[] {
    points.push(p);
    if (points.length > this.#capacity) points.splice(0, points.length - this.#capacity);
    return points;
  }
}
