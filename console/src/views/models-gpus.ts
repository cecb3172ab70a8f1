/**
 * The GPUs… dialog's table: for each count of cards, the server's own check of the change
 * (POST /models/NAME/gpus with dry_run), or its refusal in its words, before anything is applied.
 */
import type { ModelGpusCheck } from '../api.js';

/** The counts offered: one node's cards (8 on most machines). */
export const GPU_COUNTS = [1, 2, 3, 4, 5, 6, 7, 8] as const;

export type CountAnswer = { ok: true; check: ModelGpusCheck } | { ok: false; message: string };

export interface CountRow {
  cards: number;
  /** current: what the profile uses now; fits: checked and fits; unchecked: allowed, not all checked; refused. */
  state: 'current' | 'fits' | 'unchecked' | 'refused' | 'asking';
  need_gib: number | null;
  budget_gib: number | null;
  max_context: number | null;
  /** The refusal, or what was not checked. */
  reason: string | null;
}

/** A row per count; the profile's current count from any answer's `before` side. */
export function countRows(
  current: number | undefined,
  answers: ReadonlyMap<number, CountAnswer>,
  counts: readonly number[] = GPU_COUNTS,
): CountRow[] {
  let before: ModelGpusCheck['profiles'][number]['before'] | undefined;
  for (const a of answers.values()) if (a.ok) before ??= a.check.profiles[0]?.before;
  const now = before?.cards ?? current;
  return counts.map((n): CountRow => {
    const blank = { cards: n, need_gib: null, budget_gib: null, max_context: null, reason: null };
    if (n === now) {
      if (before === undefined) return { ...blank, state: 'current' };
      const { need_gib, budget_gib, max_context } = before;
      return { cards: n, state: 'current', need_gib, budget_gib, max_context, reason: null };
    }
    const a = answers.get(n);
    if (a === undefined) return { ...blank, state: 'asking' };
    if (!a.ok) return { ...blank, state: 'refused', reason: a.message };
    const after = a.check.profiles[0]?.after;
    if (after === undefined) return { ...blank, state: 'unchecked', reason: a.check.note };
    return {
      cards: n,
      state: after.fits === true && a.check.note === null ? 'fits' : 'unchecked',
      need_gib: after.need_gib,
      budget_gib: after.budget_gib,
      max_context: after.max_context,
      reason: a.check.note,
    };
  });
}

/** GiB with one decimal, `-` where not known. */
export const gibText = (v: number | null) => (v === null ? '-' : v.toFixed(1));
