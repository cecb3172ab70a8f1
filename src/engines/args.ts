/**
 * Reading the flags a profile already sets, so that an engine adds its own only where
 * the profile is silent. Both spellings count: `--flag value` and `--flag=value`. Profile
 * args reach the engine as written; whether it takes the `=` spelling is its own affair
 * (the Python engines do; llama-server's parser, as read, takes `--flag value` only).
 */

// One reader of flags for the engines and the planner (which sizes memory from the same args).
import { flagValue, hasFlag } from '../planner/args.js';

export { flagValue, hasFlag };

/** `--flag value` when the profile does not set any of the names (the first is the one written). */
export function unlessSet(
  args: readonly string[],
  names: readonly [string, ...string[]],
  value: string | number,
): string[] {
  return hasFlag(args, ...names) ? [] : [names[0], String(value)];
}

/** A flag's value when the profile sets it to a whole number above 0 (a count of requests). */
export function wholeFlag(args: readonly string[], names: readonly string[]): number | undefined {
  const v = Number(flagValue(args, ...names));
  return Number.isInteger(v) && v > 0 ? v : undefined;
}
