import { stringify } from 'yaml';

import { formatPath, isLlmgwError, messageOf } from '../core/errors.js';
import { redact } from '../core/redact.js';

import { UsageError } from './usage-error.js';

/** What a command prints: a human view by default, one JSON document with --json. */
export interface Output {
  json: boolean;
  out: (text: string) => void;
  err: (text: string) => void;
}

export function stdio(json: boolean): Output {
  return {
    json,
    out: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
    err: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
  };
}

/** Prints `data` as JSON, or the human text `human` makes of it. */
export function emit<T>(o: Output, data: T, human: (d: T) => string): void {
  if (o.json) o.out(JSON.stringify(data, null, 2));
  else o.out(human(data));
}

/** kubectl-style columns: upper-case headers, left-aligned, three spaces apart. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

export function yaml(data: unknown): string {
  return stringify(data, { lineWidth: 0 }).trimEnd();
}

/** `5s`, `3m`, `2h`, `4d`: how long ago, as kubectl shows an AGE. */
export function age(iso: string | null | undefined, now = Date.now()): string {
  if (iso === null || iso === undefined) return '-';
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** Prints an error the way the user can act on it: its message, and each issue on its own line. */
export function printError(o: Output, e: unknown): void {
  if (o.json) {
    const body = isLlmgwError(e)
      ? {
          error: {
            code: e.code,
            message: redact(e.message),
            ...(e.issues.length > 0
              ? { issues: e.issues.map((i) => ({ ...i, path: formatPath(i.path) })) }
              : {}),
          },
        }
      : {
          error: {
            code: e instanceof UsageError ? 'invalid_argument' : 'internal',
            message: redact(messageOf(e)),
          },
        };
    o.err(JSON.stringify(body));
    return;
  }
  const hint = isLlmgwError(e) && e.hint !== undefined ? `\nhint: ${e.hint}` : '';
  o.err(`error: ${redact(messageOf(e))}${hint}`);
}
