/** The Settings view's logic: what an edit changed, line by line, and where a refusal points. */

export interface DiffLine {
  kind: 'same' | 'added' | 'removed';
  text: string;
  /** The line's number in the text it comes from (the edited one for same and added). */
  line: number;
}

/** A line diff (longest common subsequence); settings files are short enough for O(n·m). */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: the common length of a[i..] and b[j..].
  const lcs = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    const row = lcs[i] as number[];
    const next = lcs[i + 1] as number[];
    for (let j = m - 1; j >= 0; j--) {
      row[j] =
        a[i] === b[j] ? (next[j + 1] as number) + 1 : Math.max(next[j] as number, row[j + 1] as number);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ kind: 'same', text: b[j] as string, line: j + 1 });
      i++;
      j++;
    } else if (i < n && (j >= m || (lcs[i + 1]?.[j] ?? 0) >= (lcs[i]?.[j + 1] ?? 0))) {
      // Removed before added, as diff and git show a changed line.
      out.push({ kind: 'removed', text: a[i] as string, line: i + 1 });
      i++;
    } else {
      out.push({ kind: 'added', text: b[j] as string, line: j + 1 });
      j++;
    }
  }
  return out;
}

/** The changed lines with `context` unchanged lines around each; a gap between hunks as null. */
export function diffHunks(diff: readonly DiffLine[], context = 2): (DiffLine | null)[] {
  const keep = diff.map(() => false);
  diff.forEach((d, k) => {
    if (d.kind === 'same') return;
    for (let x = Math.max(0, k - context); x <= Math.min(diff.length - 1, k + context); x++) keep[x] = true;
  });
  const out: (DiffLine | null)[] = [];
  diff.forEach((d, k) => {
    if (keep[k]) out.push(d);
    else if (k > 0 && keep[k - 1] === true) out.push(null);
  });
  if (out.at(-1) === null) out.pop();
  return out;
}

/** Lines added and removed. */
export function diffCounts(diff: readonly DiffLine[]): { added: number; removed: number } {
  return {
    added: diff.filter((d) => d.kind === 'added').length,
    removed: diff.filter((d) => d.kind === 'removed').length,
  };
}

/** The lines a refusal's issues name, in order, once each (to jump to in the editor). */
export function issueLines(issues: readonly { line?: number | undefined }[]): number[] {
  return [...new Set(issues.flatMap((i) => (i.line === undefined ? [] : [i.line])))].sort((x, y) => x - y);
}

/** Where line `line` (1-based) starts and ends in `text`, to select it in a text area. */
export function lineRange(text: string, line: number): { start: number; end: number } {
  let start = 0;
  for (let n = 1; n < line; n++) {
    const nl = text.indexOf('\n', start);
    if (nl < 0) return { start: text.length, end: text.length };
    start = nl + 1;
  }
  const nl = text.indexOf('\n', start);
  return { start, end: nl < 0 ? text.length : nl };
}
