import { useQuery } from '@tanstack/react-query';
import { lazy, Suspense, useState, type SyntheticEvent } from 'react';

import { queryKeys, type UsageRow } from '../api.js';
import { QueryError } from '../query-error.js';
import { useSession } from '../session.js';
import { hourLabel, usageNames, usageQuery, usageTotals, type StackBy } from './usage-series.js';

// The charts' library is most of the console's weight: it loads with the first chart, not with the console.
const UsageChart = lazy(() => import('./usage-chart.js').then((m) => ({ default: m.UsageChart })));

const spans = [
  { label: 'the last 24 hours', hours: 24 },
  { label: 'the last 7 days', hours: 24 * 7 },
  { label: 'the last 30 days', hours: 24 * 30 },
  { label: 'all recorded', hours: 0 },
] as const;

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
      <Suspense fallback={<p className="hint">Loading the charts…</p>}>
        <div className="cards">
          <UsageChart rows={rows} by={by} metric="requests" title="Requests per hour" />
          <UsageChart rows={rows} by={by} metric="tokens" title="Tokens per hour (prompt and completion)" />
        </div>
      </Suspense>
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
