import { describe, expect, it } from 'vitest';

import type { ShardView } from '../../../protocol/replica-views.js';

import { aggregate } from './aggregate.js';

const shard = (rank: number, over: Partial<ShardView>): ShardView => ({
  rank,
  node: `node-${rank}`,
  devices: ['0'],
  port: 20000 + rank,
  state: 'ready',
  restarts: 0,
  ...over,
});

describe("a replica's state from its shards", () => {
  it('is downloading while any shard waits for its files, with its own words for one', () => {
    expect(
      aggregate([
        shard(0, {
          state: 'downloading',
          reason: 'downloading hf://a/b (1.0 GB of 4.0 GB, 50 MB/s, 60 s left)',
          download: { done: 1e9, total: 4e9, rate_bps: 50e6, eta_s: 60 },
        }),
        shard(1, { state: 'starting', reason: 'loading' }),
      ]),
    ).toEqual({
      state: 'downloading',
      reason: 'downloading hf://a/b (1.0 GB of 4.0 GB, 50 MB/s, 60 s left)',
      download: { done: 1e9, total: 4e9, rate_bps: 50e6, eta_s: 60 },
    });
  });

  it('sums the bytes and rates of several shards downloading, done when the slowest is', () => {
    expect(
      aggregate([
        shard(0, { state: 'downloading', download: { done: 1e9, total: 4e9, rate_bps: 50e6, eta_s: 60 } }),
        shard(1, { state: 'downloading', download: { done: 3e9, total: 4e9, rate_bps: 100e6, eta_s: 10 } }),
      ]),
    ).toEqual({
      state: 'downloading',
      reason: 'downloading on 2 nodes (4.0 GB of 8.0 GB, 150 MB/s, 60 s left)',
      download: { done: 4e9, total: 8e9, rate_bps: 150e6, eta_s: 60 },
    });
  });

  it('has no time left when a shard cannot say its own', () => {
    expect(
      aggregate([
        shard(0, { state: 'downloading', download: { done: 0, total: 4e9, rate_bps: 0 } }),
        shard(1, { state: 'downloading', download: { done: 3e9, total: 4e9, rate_bps: 100e6, eta_s: 10 } }),
      ]).download,
    ).toEqual({ done: 3e9, total: 8e9, rate_bps: 100e6 });
  });

  it.each([
    ['a failed shard wins', 'failed'],
    ['a shard on a node not heard from wins', 'unknown'],
  ] as const)('%s over one downloading', (_what, state) => {
    expect(
      aggregate([
        shard(0, { state: 'downloading', download: { done: 0, total: 1, rate_bps: 0 } }),
        shard(1, { state, reason: 'why' }),
      ]),
    ).toEqual({ state, reason: 'why' });
  });

  it.each([
    [
      'restarted by itself when every failed shard is, at the last of their restarts',
      [
        shard(0, {
          state: 'failed',
          reason: 'exited; restarting in 1 s',
          restart_at: '2025-01-01T00:00:01.000Z',
        }),
        shard(1, {
          state: 'failed',
          reason: 'exited; restarting in 4 s',
          restart_at: '2025-01-01T00:00:04.000Z',
        }),
        shard(2, { state: 'starting' }),
      ],
      {
        state: 'failed',
        reason: 'exited; restarting in 1 s',
        restart_at: '2025-01-01T00:00:04.000Z',
      },
    ],
    [
      'not restarted by itself when one failed shard is not',
      [
        shard(0, {
          state: 'failed',
          reason: 'exited; restarting in 1 s',
          restart_at: '2025-01-01T00:00:01.000Z',
        }),
        shard(1, { state: 'failed', reason: 'the weights are not on node-1' }),
      ],
      { state: 'failed', reason: 'exited; restarting in 1 s' },
    ],
  ] as const)('is %s', (_what, shards, replica) => {
    expect(aggregate(shards)).toEqual(replica);
  });
});
