/** Bytes in a GiB and a MiB: engines log "GB" and "MiB" but count in powers of two. */
export const GIB = 2 ** 30;
export const MIB = 2 ** 20;

/** Bytes as GiB, rounded to `digits` decimals, for messages: `15.0`. */
export function gib(bytes: number, digits = 1): string {
  return (bytes / GIB).toFixed(digits);
}

/** Bytes as GiB, a number for JSON (`need_gib`), to two decimals. */
export function toGib(bytes: number): number {
  return Math.round((bytes / GIB) * 100) / 100;
}

/** `n` rounded up to a multiple of `to`. */
export function padTo(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}
