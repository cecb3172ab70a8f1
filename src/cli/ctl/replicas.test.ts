import { describe, expect, it } from 'vitest';

import type { ReplicaView } from '../../protocol/replica-views.js';

import { cut, replicaDetail, stateText } from './replicas.js';

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

  it('says under each shard which engine binary its node runs, and why', () => {
    const why =
      'from PATH: /usr/bin/llama-server (nothing installed or configured; the install failed: offline)';
    const r: ReplicaView = {
      id: 'tiny-1',
      model: 'tiny',
      profile: 'cpu',
      engine: 'llamacpp',
      state: 'ready',
      restarts: 0,
      shards: [
        {
          rank: 0,
          node: 'node-a',
          devices: [],
          port: 20000,
          state: 'ready',
          restarts: 0,
          engine_bin: { source: 'path', path: '/usr/bin/llama-server', why },
        },
      ],
    };
    const lines = replicaDetail(r).split('\n');
    expect(lines).toContain(`    engine binary: ${why}`);
  });
});

describe('a replica waiting for its files in llmgw ctl', () => {
  const r: ReplicaView = {
    id: 'qwen-1',
    model: 'qwen',
    profile: 'cpu',
    engine: 'llamacpp',
    state: 'downloading',
    reason: 'downloading hf://Qwen/Q (2.0 GB of 4.7 GB, 85 MB/s, 32 s left)',
    download: { done: 2e9, total: 4.7e9, rate_bps: 85e6, eta_s: 32 },
    restarts: 0,
    shards: [],
  };

  it('shows how far it is in the STATE column, the rest in its reason', () => {
    expect(stateText(r)).toBe('downloading 42%');
    expect(stateText({ ...r, retiring: true })).toBe('downloading 42% (replaced)');
    expect(stateText({ ...r, download: undefined })).toBe('downloading');
  });

  it('shows the whole progress in replica show', () => {
    expect(replicaDetail(r).split('\n')).toContain('Download:   2.0 GB of 4.7 GB, 85 MB/s, 32 s left');
  });
});
