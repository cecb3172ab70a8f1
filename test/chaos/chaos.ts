/**
 * The reliability suite's two scales: `npm test` runs every scenario bounded (counts and
 * times that fit the suite's budget), `npm run chaos` runs them at length (LLMGW_CHAOS=long).
 * Every scenario ends with one line that says what it did and what was lost.
 */
export type ChaosScale = 'bounded' | 'long';

export const chaosScale: ChaosScale = process.env['LLMGW_CHAOS'] === 'long' ? 'long' : 'bounded';

/** The bounded figure under `npm test`, the long one under `npm run chaos`. */
export function scaled<T>(bounded: T, long: T): T {
  return chaosScale === 'long' ? long : bounded;
}

/**
 * Prints the scenario's outcome: `chaos <name> [scale]: did k=v, ...; lost k=v, ...`. `lost`
 * holds the counts that must be zero (failed requests, missing writes, restarted engines).
 */
export function chaosReport(
  scenario: string,
  did: Record<string, string | number | boolean>,
  lost: Record<string, number>,
): string {
  const line = (o: Record<string, unknown>) =>
    Object.entries(o)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(', ');
  const text = `chaos ${scenario} [${chaosScale}]: did ${line(did)}; lost ${line(lost) || 'nothing'}`;
  console.log(text);
  return text;
}
