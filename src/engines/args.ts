/**
 * Reading the flags a profile already sets, so that an engine adds its own only where
 * the profile is silent. Both spellings count: `--flag value` and `--flag=value`. Profile
 * args reach the engine as written; whether it takes the `=` spelling is its own affair
 * (the Python engines do; llama-server's parser, as read, takes `--flag value` only).
 */

/** Whether any of these flags appears in args, as `--flag`, `--flag value` or `--flag=value`. */
export function hasFlag(args: readonly string[], ...names: string[]): boolean {
  return args.some((a) => names.some((n) => a === n || a.startsWith(`${n}=`)));
}

/**
 * The value the last of these flags is given in args, in either spelling; undefined when
 * none is set or the last one has no value after it. The last wins, as in every parser here.
 */
export function flagValue(args: readonly string[], ...names: string[]): string | undefined {
  let value: string | undefined;
  args.forEach((a, i) => {
    for (const n of names) {
      if (a === n) value = args[i + 1];
      else if (a.startsWith(`${n}=`)) value = a.slice(n.length + 1);
    }
  });
  return value;
}

/** `--flag value` when the profile does not set any of the names (the first is the one written). */
export function unlessSet(
  args: readonly string[],
  names: readonly [string, ...string[]],
  value: string | number,
): string[] {
  return hasFlag(args, ...names) ? [] : [names[0], String(value)];
}
