/** The Usage view's logic: filters into GET /usage's query, rows into chart series and totals. */
import type { UsageRow } from '../api.js';

export interface UsageFilter {
  key?: string | undefined;
  model?: string | undefined;
  /** ISO time. */
  since?: string | undefined;
}

/** GET /usage's query: set filters only, trimmed, in a fixed order ('' when none). */
export function usageQuery(filter: UsageFilter): string {
  const q = new URLSearchParams();
  for (const name of ['key', 'model', 'since'] as const) {
    const v = filter[name]?.trim();
    if (v !== undefined && v !== '') q.set(name, v);
  }
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

export type StackBy = 'model' | 'key';
export type Metric = 'requests' | 'tokens';

export interface HourPoint {
  /** ISO time at the hour's start. */
  hour: string;
  /** The value of each stacked series this hour (0 when it had none). */
  values: Record<string, number>;
}

export interface UsageSeries {
  /** Every hour from the first to the last row's, oldest first: quiet hours show as gaps of 0. */
  points: HourPoint[];
  /** Series names, largest total first (the stack's order). */
  names: string[];
}

const hourMs = 3_600_000;

function nameOf(r: UsageRow, by: StackBy): string {
  return by === 'model' ? r.model : r.key_name;
}

function valueOf(r: UsageRow, metric: Metric): number {
  return metric === 'requests' ? r.requests : r.prompt_tokens + r.completion_tokens;
}

/** Requests or tokens (prompt and completion) per hour, stacked by model or by key. */
export function usageSeries(rows: readonly UsageRow[], by: StackBy, metric: Metric): UsageSeries {
  const totals = new Map<string, number>();
  const byHour = new Map<number, Record<string, number>>();
  for (const r of rows) {
    const name = nameOf(r, by);
    const v = valueOf(r, metric);
    totals.set(name, (totals.get(name) ?? 0) + v);
    const h = Math.floor(Date.parse(r.hour) / hourMs) * hourMs;
    const at = byHour.get(h) ?? {};
    at[name] = (at[name] ?? 0) + v;
    byHour.set(h, at);
  }
  const names = [...totals.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([n]) => n);
  if (byHour.size === 0) return { points: [], names };
  const hours = [...byHour.keys()];
  const first = Math.min(...hours);
  const last = Math.max(...hours);
  const points: HourPoint[] = [];
  for (let h = first; h <= last; h += hourMs) {
    const at = byHour.get(h) ?? {};
    points.push({
      hour: new Date(h).toISOString(),
      values: Object.fromEntries(names.map((n) => [n, at[n] ?? 0])),
    });
  }
  return { points, names };
}

export interface UsageTotal {
  name: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

/** Totals per model or key, most requests first, and the sum of all as the last row. */
export function usageTotals(rows: readonly UsageRow[], by: StackBy): { rows: UsageTotal[]; all: UsageTotal } {
  const m = new Map<string, UsageTotal>();
  const all: UsageTotal = { name: 'all', requests: 0, promptTokens: 0, completionTokens: 0 };
  for (const r of rows) {
    const name = nameOf(r, by);
    const t = m.get(name) ?? { name, requests: 0, promptTokens: 0, completionTokens: 0 };
    for (const x of [t, all]) {
      x.requests += r.requests;
      x.promptTokens += r.prompt_tokens;
      x.completionTokens += r.completion_tokens;
    }
    m.set(name, t);
  }
  return {
    rows: [...m.values()].sort((a, b) => b.requests - a.requests || a.name.localeCompare(b.name)),
    all,
  };
}

/** Distinct keys and models in the rows, sorted: the filters' suggestions. */
export function usageNames(rows: readonly UsageRow[]): { keys: string[]; models: string[] } {
  return {
    keys: [...new Set(rows.map((r) => r.key_name))].sort(),
    models: [...new Set(rows.map((r) => r.model))].sort(),
  };
}

/** An hour as the charts and the table show it: `Dec 3 14:00`, in the browser's zone. */
export function hourLabel(iso: string): string {
  const d = new Date(iso);
  return `${d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })} ${String(d.getHours()).padStart(2, '0')}:00`;
}
