import { UsageError } from '../usage-error.js';

const units = { s: 1, m: 60, h: 3600, d: 86400 } as const;

/** `90s`, `30m`, `24h`, `7d` as seconds. */
export function parseDuration(value: string, flag: string): number {
  const m = /^(\d+)([smhd])$/.exec(value.trim());
  if (m === null) throw new UsageError(`${flag} ${value} is not a duration: write e.g. 30m, 24h or 7d`);
  return Number(m[1]) * units[m[2] as keyof typeof units];
}
