import { distance } from 'fastest-levenshtein';

/** The candidate closest to a misspelt word, when it is close enough to be a likely typo. */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const lower = word.toLowerCase();
  for (const c of candidates) {
    const d = distance(lower, c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  // A third of the word may be wrong: catches `gpu_clas` and `contex_length`, not `foo` for `tp`.
  if (best === undefined || bestDistance > Math.max(1, Math.floor(word.length / 3))) return undefined;
  return best;
}

/** ` (did you mean "x"?)`, or nothing. */
export function didYouMeanSuffix(word: string, candidates: readonly string[]): string {
  const m = didYouMean(word, candidates);
  return m === undefined ? '' : `; did you mean "${m}"?`;
}
