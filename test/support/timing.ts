/** Small waits for tests that drive sockets and servers. */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` until it gives a value (anything but undefined or false) and returns that value.
 * A probe that throws counts as "not yet". After `timeoutMs` it throws, naming `what`, the last
 * error the probe threw and `detail` (what the caller last saw). Unless `everyMs` is given, the
 * pause between probes grows from 5 ms to 50 ms: quick for what is nearly there, light on a shared
 * machine for what takes seconds.
 */
export async function until<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 20_000,
  o: { everyMs?: number; detail?: () => string } = {},
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  let pause = o.everyMs ?? 5;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      const why =
        last === undefined ? '' : `: ${last instanceof Error ? last.message : JSON.stringify(last)}`;
      throw new Error(`timed out waiting for ${what}${why}${o.detail?.() ?? ''}`);
    }
    await sleep(pause);
    if (o.everyMs === undefined) pause = Math.min(50, pause * 2);
  }
}

/** A promise with its resolve, for a server that waits on the test. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** A small deterministic generator (mulberry32): a failing random case is replayed from its seed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
