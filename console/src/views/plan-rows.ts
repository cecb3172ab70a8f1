/** The Plan view's table, the columns of `llmgw ctl plan` (src/cli/ctl/plan.ts planText), best first as sent. */
import type { PlanAnswer } from '../api.js';

export const PLAN_COLUMNS = [
  'Profile',
  'Engine',
  'Class',
  'Cards',
  'Fits',
  'Need/card',
  'Budget',
  'Weights',
  'KV',
  'Max context',
  'Reason',
] as const;

/** A reason longer than this is cut in the table; the whole one is shown on demand. */
export const REASON_WIDTH = 96;

export interface PlanRow {
  cells: string[];
  fits: boolean;
  /** The whole reason; null when it fits. */
  reason: string | null;
  /** The reason as the table shows it: cut like ctl plan's when long. */
  short: string;
}

const num = (v: number | null) => (v === null ? '-' : v.toFixed(1));

export function planRows(a: PlanAnswer): PlanRow[] {
  return a.options.map((p) => {
    const short = p.reason === null ? '' : cut(p.reason);
    return {
      cells: [
        p.profile ?? '-',
        p.engine,
        p.class,
        p.class === 'cpu' ? '-' : String(p.cards),
        p.fits ? 'yes' : 'no',
        num(p.need_gib),
        num(p.budget_gib),
        num(p.weights_gib),
        num(p.kv_gib),
        p.max_context === null ? '-' : String(p.max_context),
        short,
      ],
      fits: p.fits,
      reason: p.reason,
      short,
    };
  });
}

/** `qwen at 32768 tokens: per card, GiB`. */
export function planHead(a: PlanAnswer): string {
  return `${a.model}${a.context === null ? '' : ` at ${a.context} tokens`}: per card, GiB`;
}

/** The start and the end of a long reason, at spaces: the end says what to do. */
export function cut(text: string): string {
  if (text.length <= REASON_WIDTH) return text;
  const head = text.slice(0, 32).replace(/\s+\S*$/, '');
  const tail = text.slice(text.length - (REASON_WIDTH - head.length - 3)).replace(/^\S*\s+/, '');
  return `${head} … ${tail}`;
}

/** The form's context: empty for the model's own, else a whole number of tokens from 256. */
export function contextField(
  text: string,
): { ok: true; value: number | undefined } | { ok: false; message: string } {
  const t = text.trim();
  if (t === '') return { ok: true, value: undefined };
  if (!/^\d+$/.test(t) || Number(t) < 256 || Number(t) > 2 ** 24)
    return {
      ok: false,
      message: `context is a number of tokens from 256 to ${2 ** 24}, such as 32768 (got "${t}")`,
    };
  return { ok: true, value: Number(t) };
}

/** The form's classes, comma separated; none for the cluster's. */
export function classesField(text: string): string[] {
  return text
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
}
