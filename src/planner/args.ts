/**
 * Reading what a profile's args set, as each engine reads its own command line: both
 * `--flag value` and `--flag=value`, the last occurrence winning. The engines' commands read
 * flags with these same functions (src/engines/args.ts re-exports them).
 */

/** The value the last of these flags is given; undefined when none is set. */
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

/** Whether any of these flags is present, with or without a value. */
export function hasFlag(args: readonly string[], ...names: string[]): boolean {
  return args.some((a) => names.some((n) => a === n || a.startsWith(`${n}=`)));
}

/** A number a flag is given, or why it cannot be used: the engine would refuse it too. */
export type ArgNumber = { set: false } | { set: true; value: number } | { set: true; problem: string };

export function numberFlag(
  args: readonly string[],
  names: readonly [string, ...string[]],
  valid: (n: number) => boolean,
  expected: string,
): ArgNumber {
  const raw = flagValue(args, ...names);
  if (raw === undefined)
    return hasFlag(args, ...names) ? bad(names[0], '(nothing)', expected) : { set: false };
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || !valid(n)) return bad(names[0], raw, expected);
  return { set: true, value: n };
}

const bad = (flag: string, raw: string, expected: string): ArgNumber => ({
  set: true,
  problem: `the profile's ${flag} is ${raw === '(nothing)' ? 'given no value' : `"${raw}"`}, not ${expected}: the engine would not start with it`,
});
