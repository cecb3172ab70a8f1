import { describe, expect, it } from 'vitest';

import { Passes } from './passes.js';

/** Passes over a pass that counts its runs and ends when `release` is called. */
function counting(paced = false) {
  let runs = 0;
  const waiting: (() => void)[] = [];
  const failures: unknown[] = [];
  const passes = new Passes({
    pass: () => {
      runs++;
      return new Promise<void>((resolve) => waiting.push(resolve));
    },
    failed: (e) => failures.push(e),
    paced,
  });
  const release = async () => {
    // Let a paced pass's timer fire, then end every pass running.
    await new Promise((r) => setTimeout(r, 5));
    for (const done of waiting.splice(0)) done();
    await new Promise((r) => setTimeout(r, 5));
  };
  return { passes, runs: () => runs, release, failures };
}

describe('Passes', () => {
  it('runs pokes that come during a pass as one more pass after it', async () => {
    const { passes, runs, release } = counting();
    passes.poke();
    passes.poke();
    passes.poke();
    expect(runs()).toBe(1);
    await release();
    expect(runs()).toBe(2);
    await release();
    await passes.settled();
    expect(runs()).toBe(2);
  });

  it('holds pokes while work is held, and runs them when asked to resume', async () => {
    const { passes, runs, release } = counting(true);
    await passes.held(async () => {
      passes.poke();
      await release();
      expect(runs()).toBe(0);
    });
    passes.resume();
    await release();
    await passes.settled();
    expect(runs()).toBe(1);
  });

  it('says a failed pass and goes on; after stop, pokes run nothing', async () => {
    const failures: unknown[] = [];
    let runs = 0;
    const passes = new Passes({
      pass: () => {
        runs++;
        return Promise.reject(new Error('boom'));
      },
      failed: (e) => failures.push(e),
    });
    passes.poke();
    await passes.settled();
    expect(failures).toHaveLength(1);
    await passes.stop();
    passes.poke();
    await passes.settled();
    expect(runs).toBe(1);
  });
});
