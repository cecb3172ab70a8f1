import { describe, expect, it } from 'vitest';

import type { ReplicaView } from '../../protocol/replica-views.js';

import { cut, replicaDetail } from './replicas.js';

describe('replica views in llmgw ctl', () => {
  it.each([
    ['short', 10, 'short'],
    ['exactly ten', 11, 'exactly ten'],
    ['one line\n  of  several', 40, 'one line of several'],
    ['a reason longer than the column', 12, 'a reason lo…'],
    ['cut after a word ', 10, 'cut after…'],
  ])('cuts %j to %i characters: %j', (text, width, expected) => {
    expect(cut(text, width)).toBe(expected);
    expect(cut(text, width).length).toBeLessThanOrEqual(width);
  });

  it('shows the whole reason in replica show, apart from the state', () => {
    const reason = `the engine exited with code 1: ${'x'.repeat(380)}`;
    const r: ReplicaView = {
      id: 'tiny-1',
      model: 'tiny',
      profile: 'cpu',
      engine: 'llamacpp',
      state: 'failed',
      reason,
      restarts: 3,
      shards: [],
    };
    const lines = replicaDetail(r).split('\n');
    expect(lines).toContain('State:      failed');
    expect(lines).toContain(`Reason:     ${reason}`);
  });
});
