import { useInfiniteQuery } from '@tanstack/react-query';
import { useState, type SyntheticEvent } from 'react';

import { queryKeys, type AuditView } from '../api.js';
import { useSession } from '../session.js';
import {
  auditPage,
  auditQuery,
  auditSummary,
  nextBefore,
  resolveSince,
  type AuditFilter,
} from './audit-filter.js';

interface FilterForm {
  actor: string;
  action: string;
  target: string;
  since: string;
}

const emptyForm: FilterForm = { actor: '', action: '', target: '', since: '' };

/** Who changed what, and when: the audit log, newest first, paged back by id (admin). */
export function Audit() {
  const { api } = useSession();
  const [form, setForm] = useState(emptyForm);
  const [applied, setApplied] = useState<AuditFilter>({});
  const [sinceError, setSinceError] = useState<string | undefined>();
  const log = useInfiniteQuery({
    queryKey: [...queryKeys.audit, applied],
    queryFn: ({ pageParam }) => api.audit(auditQuery(applied, { limit: auditPage, before: pageParam })),
    initialPageParam: undefined as number | undefined,
    getNextPageParam: (last) => nextBefore(last, auditPage),
  });

  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    const since = resolveSince(form.since, Date.now());
    if ('error' in since) {
      setSinceError(since.error);
      return;
    }
    setSinceError(undefined);
    setApplied({ actor: form.actor, action: form.action, target: form.target, since: since.iso });
  };
  const field = (name: keyof FilterForm, label: string, hint: string) => (
    <div className="field">
      <label htmlFor={`audit-${name}`}>{label}</label>
      <input
        id={`audit-${name}`}
        value={form[name]}
        placeholder={hint}
        {...(name === 'since'
          ? { 'aria-invalid': sinceError !== undefined, 'aria-describedby': 'audit-since-error' }
          : {})}
        onChange={(e) => {
          setForm({ ...form, [name]: e.target.value });
        }}
      />
      {name === 'since' && sinceError !== undefined && (
        <span id="audit-since-error" role="alert" className="error">
          {sinceError}
        </span>
      )}
    </div>
  );
  const entries = log.data?.pages.flat() ?? [];

  return (
    <section aria-labelledby="view-title" className="audit">
      <h1 id="view-title">Audit</h1>
      <form className="form-grid card" role="search" aria-label="Filter the audit log" onSubmit={submit}>
        {field('actor', 'Actor', 'a key name')}
        {field('action', 'Action', 'key.create, model.update…')}
        {field('target', 'Target', 'model/NAME, key/NAME')}
        {field('since', 'Since', '2h, 7d or 2026-12-01T09:00Z')}
        <div className="actions">
          <button type="submit">Filter</button>
          <button
            type="button"
            onClick={() => {
              setForm(emptyForm);
              setSinceError(undefined);
              setApplied({});
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <article aria-labelledby="log-title" className="card">
        <h2 id="log-title">Entries</h2>
        {log.isPending && <p className="hint">Loading the audit log…</p>}
        {log.error !== null && (
          <p role="alert" className="error">
            Could not load the audit log: {log.error.message}
          </p>
        )}
        {log.data && entries.length === 0 && <p className="hint">No entries match.</p>}
        {entries.length > 0 && <AuditTable entries={entries} />}
        {log.hasNextPage && (
          <button
            type="button"
            disabled={log.isFetchingNextPage}
            onClick={() => {
              void log.fetchNextPage();
            }}
          >
            {log.isFetchingNextPage ? 'Loading…' : `Older entries`}
          </button>
        )}
      </article>
    </section>
  );
}

function AuditTable({ entries }: { entries: AuditView[] }) {
  return (
    <div className="table-scroll">
      <table aria-label="Audit entries">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Actor</th>
            <th scope="col">Action</th>
            <th scope="col">Target</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id}>
              <td>
                <time dateTime={e.at}>{new Date(e.at).toLocaleString()}</time>
              </td>
              <td>{e.actor}</td>
              <td className="mono">{e.action}</td>
              <td className="mono">{e.target}</td>
              <td className="detail">
                <details>
                  <summary>{auditSummary(e.detail) || '(no detail)'}</summary>
                  <pre>{JSON.stringify(e.detail, null, 2)}</pre>
                </details>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
