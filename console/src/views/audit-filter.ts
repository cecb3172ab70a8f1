/** The Audit view's logic: the filter form into GET /audit's query, and an entry's detail in brief. */
import type { AuditView } from '../api.js';

const unitSeconds = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/**
 * "Since" as `ctl audit --since` reads it: a duration back from `now` (90s, 30m, 2h, 7d) or a
 * time (an ISO time, or a datetime-local value, read in the browser's zone). Empty: no bound.
 */
export function resolveSince(text: string, now: number): { iso: string | undefined } | { error: string } {
  const t = text.trim();
  if (t === '') return { iso: undefined };
  const d = /^(\d+)([smhd])$/.exec(t);
  if (d !== null) {
    const seconds = Number(d[1]) * unitSeconds[d[2] as keyof typeof unitSeconds];
    return { iso: new Date(now - seconds * 1000).toISOString() };
  }
  const at = Date.parse(t);
  if (Number.isNaN(at))
    return { error: `"${t}" is neither a time (2026-12-01T09:00:00Z) nor a duration back (30m, 2h, 7d)` };
  return { iso: new Date(at).toISOString() };
}

export interface AuditFilter {
  actor?: string | undefined;
  action?: string | undefined;
  target?: string | undefined;
  /** ISO time (resolveSince's). */
  since?: string | undefined;
}

/** The page size the view asks for. */
export const auditPage = 50;

/** GET /audit's query: set filters only, trimmed, in a fixed order; `before` pages back by id. */
export function auditQuery(
  filter: AuditFilter,
  page: { limit: number; before?: number | undefined },
): string {
  const q = new URLSearchParams();
  q.set('limit', String(page.limit));
  if (page.before !== undefined) q.set('before', String(page.before));
  for (const name of ['actor', 'action', 'target', 'since'] as const) {
    const v = filter[name]?.trim();
    if (v !== undefined && v !== '') q.set(name, v);
  }
  return `?${q.toString()}`;
}

/** The next page's `before`: the oldest entry's id, while a page came back full. */
export function nextBefore(page: readonly AuditView[], limit: number): number | undefined {
  if (page.length < limit) return undefined;
  return page.reduce((min, e) => Math.min(min, e.id), Number.POSITIVE_INFINITY);
}

function short(v: unknown): string {
  if (v === undefined) return '(none)';
  const s = JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

/** One line for the table, as `ctl audit` prints it: changes as path: before -> after. */
export function auditSummary(detail: Record<string, unknown>): string {
  const changes = detail['changes'];
  if (Array.isArray(changes)) {
    return (changes as { path: string; before?: unknown; after?: unknown }[])
      .map((c) => `${c.path}: ${short(c.before)} -> ${short(c.after)}`)
      .join('; ');
  }
  return Object.entries(detail)
    .filter(([k]) => k !== 'spec')
    .map(([k, v]) => `${k}=${short(v)}`)
    .join(' ');
}
