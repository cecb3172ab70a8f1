import { useQuery } from '@tanstack/react-query';
import { useState, type SyntheticEvent } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';

import { queryKeys, type UsageRow } from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import {
  usageNames,
  usageQuery,
  usageSeries,
  usageTotals,
  type Metric,
  type StackBy,
} from './usage-series.js';

const spans = [
  { label: 'the last 24 hours', hours: 24 },
  { label: 'the last 7 days', hours: 24 * 7 },
  { label: 'the last 30 days', hours: 24 * 30 },
  { label: 'all recorded', hours: 0 },
] as const;

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

/** The table shows this many hourly rows at most; the charts and totals count them all. */
const shownRows = 200;

interface Filter {
  key: string;
  model: string;
  hours: number;
}

function sinceOf(hours: number, now: number): string | undefined {
  if (hours === 0) return undefined;
  // From the start of the hour, so the first bar is a whole hour.
  return new Date(Math.floor(now / 3_600_000) * 3_600_000 - (hours - 1) * 3_600_000).toISOString();
}

/** Requests and tokens through the gateway per key, model and hour (admin: GET /usage is theirs). */
export function Usage() {
  const { api } = useSession();
  const [form, setForm] = useState<Filter>({ key: '', model: '', hours: 24 });
  const [query, setQuery] = useState(() => usageQuery({ since: sinceOf(24, Date.now()) }));
  const [by, setBy] = useState<StackBy>('model');
  const usage = useQuery({ queryKey: [...queryKeys.usage, query], queryFn: () => api.usage(query) });
  const keys = useQuery({ queryKey: queryKeys.keys, queryFn: () => api.keys() });
  const names = usageNames(usage.data ?? []);

  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    setQuery(usageQuery({ key: form.key, model: form.model, since: sinceOf(form.hours, Date.now()) }));
  };

  return (
    <section aria-labelledby="view-title" className="usage">
      <h1 id="view-title">Usage</h1>
      <form className="form-grid card" role="search" aria-label="Filter usage" onSubmit={submit}>
        <div className="field">
          <label htmlFor="usage-key">Key</label>
          <input
            id="usage-key"
            list="usage-keys"
            value={form.key}
            placeholder="every key"
            onChange={(e) => {
              setForm({ ...form, key: e.target.value });
            }}
          />
          <datalist id="usage-keys">
            {(keys.data?.map((k) => k.name) ?? names.keys).map((n) => (
              <option key={n} value={n} />
            ))}
          </datalist>
        </div>
        <div className="field">
          <label htmlFor="usage-model">Model</label>
          <input
            id="usage-model"
            list="usage-models"
            value={form.model}
            placeholder="every model (MODEL:ADAPTER for an adapter)"
            onChange={(e) => {
              setForm({ ...form, model: e.target.value });
            }}
          />
          <datalist id="usage-models">
            {names.models.map((n) => (
              <option key={n} value={n} />
            ))}
          </datalist>
        </div>
        <div className="field">
          <label htmlFor="usage-since">Since</label>
          <select
            id="usage-since"
            value={form.hours}
            onChange={(e) => {
              setForm({ ...form, hours: Number(e.target.value) });
            }}
          >
            {spans.map((s) => (
              <option key={s.hours} value={s.hours}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        <div className="actions">
          <button type="submit">Show</button>
        </div>
      </form>
      <div className="field inline">
        <label htmlFor="usage-by">Stack by</label>
        <select
          id="usage-by"
          value={by}
          onChange={(e) => {
            setBy(e.target.value as StackBy);
          }}
        >
          <option value="model">model</option>
          <option value="key">key</option>
        </select>
      </div>
      <QueryError query={usage} what="usage" />
      {usage.data && usage.data.length === 0 && <p className="hint">No usage recorded for that.</p>}
      {usage.data && usage.data.length > 0 && <UsageData rows={usage.data} by={by} />}
    </section>
  );
}

function UsageData({ rows, by }: { rows: UsageRow[]; by: StackBy }) {
  const totals = usageTotals(rows, by);
  return (
    <>
      <div className="cards">
        <UsageChart rows={rows} by={by} metric="requests" title="Requests per hour" />
        <UsageChart rows={rows} by={by} metric="tokens" title="Tokens per hour (prompt and completion)" />
      </div>
      <article aria-labelledby="totals-title" className="card">
        <h2 id="totals-title">Totals by {by}</h2>
        <div className="table-scroll">
          <table aria-labelledby="totals-title">
            <thead>
              <tr>
                <th scope="col">{by === 'model' ? 'Model' : 'Key'}</th>
                <th scope="col">Requests</th>
                <th scope="col">Prompt tokens</th>
                <th scope="col">Completion tokens</th>
              </tr>
            </thead>
            <tbody>
              {[...totals.rows, totals.all].map((t) => (
                <tr
                  key={t === totals.all ? '\0all' : t.name}
                  className={t === totals.all ? 'total' : undefined}
                >
                  <th scope="row">{t === totals.all ? 'All' : t.name}</th>
                  <td>{t.requests.toLocaleString()}</td>
                  <td>{t.promptTokens.toLocaleString()}</td>
                  <td>{t.completionTokens.toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </article>
      <article aria-labelledby="hours-title" className="card">
        <h2 id="hours-title">Per key, model and hour</h2>
        {rows.length > shownRows && (
          <p className="hint">
            The newest {shownRows} of {rows.length} rows; narrow the filters to see older ones.
          </p>
        )}
        <div className="table-scroll">
          <table aria-labelledby="hours-title">
            <thead>
              <tr>
                <th scope="col">Hour</th>
                <th scope="col">Key</th>
                <th scope="col">Model</th>
                <th scope="col">Requests</th>
                <th scope="col">Prompt tokens</th>
                <th scope="col">Completion tokens</th>
              </tr>
            </thead>
            <tbody>
              {rows.slice(0, shownRows).map((r) => (
                <tr key={`${r.hour} ${r.key_name} ${r.model}`}>
                  <td>
                    <time dateTime={r.hour}>{hourLabel(r.hour)}</time>
                  </td>
                  <td>{r.key_name}</td>
                  <td>{r.model}</td>
                  <td>{r.requests.toLocaleString()}</td>
                  <td>{r.prompt_tokens.toLocaleString()}</td>
                  <td>{r.completion_tokens.toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </article>
    </>
  );
}

function hourLabel(iso: string): string {
  const d = new Date(iso);
  return `${d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })} ${String(d.getHours()).padStart(2, '0')}:00`;
}

function UsageChart({
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
