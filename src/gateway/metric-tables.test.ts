import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { CounterTable, HistogramTable } from './metric-tables.js';

describe('metric tables', () => {
  it('expose counters in the Prometheus text format, one line per label set', async () => {
    const registry = new Registry();
    const c = new CounterTable({ name: 'x_total', help: 'Things', registers: [registry] });
    c.cell('a', () => ({ model: 'a', key: 'k' })).value += 2;
    c.cell('a', () => ({ model: 'never', key: 'made' })).value += 1;
    c.cell('b', () => ({ model: 'b', key: 'k' })).value += 5;
    const text = await registry.metrics();
    expect(text).toContain('# HELP x_total Things\n# TYPE x_total counter\n');
    expect(text).toContain('x_total{model="a",key="k"} 3\n');
    expect(text).toContain('x_total{model="b",key="k"} 5');
    expect(text).not.toContain('never');
  });

  it('expose histograms with cumulative buckets, +Inf, sum and count', async () => {
    const registry = new Registry();
    const h = new HistogramTable({
      name: 'd_seconds',
      help: 'Durations',
      registers: [registry],
      buckets: [1, 0.1, 0.5],
    });
    const cell = h.cell('m', () => ({ model: 'm' }));
    for (const v of [0.05, 0.1, 0.3, 0.7, 2]) cell.observe(v);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE d_seconds histogram');
    expect(text).toContain('d_seconds_bucket{le="0.1",model="m"} 2\n');
    expect(text).toContain('d_seconds_bucket{le="0.5",model="m"} 3\n');
    expect(text).toContain('d_seconds_bucket{le="1",model="m"} 4\n');
    expect(text).toContain('d_seconds_bucket{le="+Inf",model="m"} 5\n');
    expect(text).toContain('d_seconds_sum{model="m"} 3.15');
    expect(text).toContain('d_seconds_count{model="m"} 5');
  });

  it('refuse a second metric of the same name in one registry', () => {
    const registry = new Registry();
    new CounterTable({ name: 'dup_total', help: 'h', registers: [registry] });
    expect(() => new CounterTable({ name: 'dup_total', help: 'h', registers: [registry] })).toThrow(
      /dup_total/,
    );
  });
});
