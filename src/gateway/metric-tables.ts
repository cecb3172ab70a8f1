import type { Registry } from 'prom-client';

/**
 * Counters and histograms for the per-request path, kept as plain numbers that the
 * gateway adds to directly and prom-client's registry reads at scrape time. prom-client's
 * own metrics hash the label set on every call (labelled children included), which
 * costs more per request than the rest of the accounting together.
 */

type Labels = Record<string, string>;

interface MetricValue {
  labels: Labels;
  value: number;
  metricName?: string;
}

/** What prom-client's registry asks of a metric. */
abstract class Table {
  readonly name: string;
  readonly help: string;
  abstract readonly type: 'counter' | 'histogram';
  readonly aggregator = 'sum';

  constructor(o: { name: string; help: string; registers: Registry[] }) {
    this.name = o.name;
    this.help = o.help;
    // The registry only calls get() and reset() and reads these fields.
    for (const r of o.registers)
      r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: this.values(),
    };
  }

  abstract values(): MetricValue[];
  abstract reset(): void;
}

export interface CounterCell {
  value: number;
}

export class CounterTable extends Table {
  readonly type = 'counter';
  readonly #cells = new Map<string, { labels: Labels; cell: CounterCell }>();

  /** The cell of one label set, made on first use; `id` names the set. */
  cell(id: string, labels: () => Labels): CounterCell {
    let c = this.#cells.get(id);
    if (c === undefined) {
      c = { labels: labels(), cell: { value: 0 } };
      this.#cells.set(id, c);
    }
    return c.cell;
  }

  values(): MetricValue[] {
    return [...this.#cells.values()].map((c) => ({ labels: c.labels, value: c.cell.value }));
  }

  reset(): void {
    this.#cells.clear();
  }
}

/** Observations of one label set: counts per bucket (not cumulative), sum and count. */
export class HistogramCell {
  readonly #bounds: readonly number[];
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.#bounds = bounds;
    this.counts = new Array<number>(bounds.length).fill(0);
  }

  observe(v: number): void {
    this.sum += v;
    this.count++;
    const b = this.#bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= (b[i] as number)) {
        (this.counts[i] as number)++;
        return;
      }
    }
  }
}

export class HistogramTable extends Table {
  readonly type = 'histogram';
  readonly #bounds: readonly number[];
  readonly #cells = new Map<string, { labels: Labels; cell: HistogramCell }>();

  constructor(o: { name: string; help: string; registers: Registry[]; buckets: readonly number[] }) {
    super(o);
    this.#bounds = [...o.buckets].sort((a, b) => a - b);
  }

  cell(id: string, labels: () => Labels): HistogramCell {
    let c = this.#cells.get(id);
    if (c === undefined) {
      c = { labels: labels(), cell: new HistogramCell(this.#bounds) };
      this.#cells.set(id, c);
    }
    return c.cell;
  }

  values(): MetricValue[] {
    const out: MetricValue[] = [];
    for (const { labels, cell } of this.#cells.values()) {
      let cumulative = 0;
      this.#bounds.forEach((bound, i) => {
        cumulative += cell.counts[i] as number;
        out.push({
          metricName: `${this.name}_bucket`,
          labels: { le: String(bound), ...labels },
          value: cumulative,
        });
      });
      out.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...labels }, value: cell.count });
      out.push({ metricName: `${this.name}_sum`, labels, value: cell.sum });
      out.push({ metricName: `${this.name}_count`, labels, value: cell.count });
    }
    return out;
  }

  reset(): void {
    this.#cells.clear();
  }
}
