import { distance } from 'fastest-levenshtein';

/**
 * Longest word a suggestion is looked for: names llmgw knows (DNS labels, settings keys,
 * environment variables) are shorter, and the edit distance costs the product of the lengths.
 */
export const didYouMeanMaxLength = 128;

/** The candidate closest to a misspelt word, when it is close enough to be a likely typo. */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  // A longer word is no typo of anything we know, whatever a client sent.
  if (word.length > didYouMeanMaxLength) return undefined;
  // A third of the word may be wrong: catches `gpu_clas` and `contex_length`, not `foo` for `tp`.
  const allowed = Math.max(1, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestDistance = allowed + 1;
  const lower = word.toLowerCase();
  for (const c of candidates) {
    // The distance is at least the difference in length: most candidates cost no more than this.
    if (Math.abs(c.length - word.length) >= bestDistance || c.length > didYouMeanMaxLength) continue;
    const d = distance(lower, c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)`, or nothing. */
export function didYouMeanSuffix(word: string, candidates: readonly string[]): string {
  const m = didYouMean(word, candidates);
  return m === undefined ? '' : `; did you mean "${m}"?`;
}
