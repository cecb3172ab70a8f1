import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';

import type { UsageRow } from '../api.js';
import { hourLabel, usageSeries, type Metric, type StackBy } from './usage-series.js';

/** Readable on light and dark backgrounds alike. */
const palette = [
  '#4e79a7',
  '#f28e2b',
  '#59a14f',
  '#e15759',
  '#76b7b2',
  '#edc948',
  '#b07aa1',
  '#ff9da7',
  '#9c755f',
  '#8c8c8c',
];

/** One chart of usage per hour, stacked by model or key (loaded lazily: recharts is large). */
export function UsageChart({
  rows,
  by,
  metric,
  title,
}: {
  rows: UsageRow[];
  by: StackBy;
  metric: Metric;
  title: string;
}) {
  const series = usageSeries(rows, by, metric);
  const id = `chart-${metric}`;
  return (
    <article aria-labelledby={id} className="card chart">
      <h2 id={id}>{title}</h2>
      {/* The tables below carry the same numbers for screen readers. */}
      <div
        role="img"
        aria-label={`${title}, stacked by ${by}: ${series.names.join(', ')}`}
        className="chart-box"
      >
        <ResponsiveContainer width="100%" height={260}>
          <BarChart data={series.points}>
            <CartesianGrid strokeDasharray="3 3" stroke="var(--border)" />
            <XAxis dataKey="hour" tickFormatter={hourLabel} stroke="var(--muted)" minTickGap={24} />
            <YAxis stroke="var(--muted)" allowDecimals={false} width={56} />
            <Tooltip
              labelFormatter={(l) => (typeof l === 'string' ? hourLabel(l) : '')}
              contentStyle={{
                background: 'var(--surface)',
                borderColor: 'var(--border)',
                color: 'var(--text)',
              }}
            />
            <Legend />
            {series.names.map((n, i) => (
              // A function, not a string: names hold dots ("qwen2.5-7b"), which a string key reads as a path.
              <Bar
                key={n}
                name={n}
                stackId="usage"
                dataKey={(p: { values: Record<string, number> }) => p.values[n] ?? 0}
                fill={palette[i % palette.length]}
                isAnimationActive={false}
              />
            ))}
          </BarChart>
        </ResponsiveContainer>
      </div>
    </article>
  );
}
