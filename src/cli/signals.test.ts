import { describe, expect, it } from 'vitest';

import { startedByNpm, whenParentGone } from './signals.js';

describe('stopping when the process that started llmgw has gone', () => {
  it.each([
    [{ npm_lifecycle_event: 'npx', npm_command: 'exec' }, true],
    [{ npm_lifecycle_event: 'start' }, true],
    [{ npm_execpath: '/usr/lib/node_modules/npm/bin/npm-cli.js' }, true],
    [{ PATH: '/usr/bin' }, false],
  ])('started by npm with %j: %s', (env, expected) => {
    expect(startedByNpm(env)).toBe(expected);
  });

  it('resolves once the parent pid changes (re-parented to init or a subreaper)', async () => {
    const seen = [4242, 4242, 4242, 1];
    let calls = 0;
    const w = whenParentGone({
      startedBy: 4242,
      ppid: () => seen[Math.min(calls++, seen.length - 1)] ?? 1,
      intervalMs: 5,
    });
    await w.gone;
    expect(calls).toBe(4);
  });

  it('resolves at once when the parent went away before the watch began', async () => {
    let calls = 0;
    const w = whenParentGone({ startedBy: 4242, ppid: () => (calls++, 1), intervalMs: 60_000 });
    // Settled before the event loop turns once: one look, no wait for the first interval.
    const first = await Promise.race([
      w.gone.then(() => 'gone'),
      new Promise((resolve) => setImmediate(() => resolve('still waiting'))),
    ]);
    w.cancel();
    expect(first).toBe('gone');
    expect(calls).toBe(1);
  });

  it('stops polling when cancelled', async () => {
    let calls = 0;
    const w = whenParentGone({ startedBy: 7, ppid: () => (calls++, 7), intervalMs: 5 });
    await new Promise((r) => setTimeout(r, 30));
    w.cancel();
    const after = calls;
    await new Promise((r) => setTimeout(r, 30));
    expect(calls).toBe(after);
  });
});
