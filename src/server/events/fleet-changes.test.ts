import { describe, expect, it } from 'vitest';

import type { Shard } from '../../placement/types.js';
import type { ShardStatusWire } from '../../protocol/agent-protocol.js';
import type { ReplicaRecord, RolloutRecord } from '../../store/store.js';
import { cpuModel } from '../../../test/support/assignments.js';

import type { EventData, EventPublisher, EventTopic } from './event-hub.js';
import {
  placementChanges,
  publishDownloads,
  publishStatuses,
  statusChanges,
  type PlacementView,
} from './fleet-changes.js';

const replica = (id: string, model: string, extra: Partial<ReplicaRecord> = {}): ReplicaRecord => ({
  id,
  model,
  profile: 'cpu',
  created_at: '2026-12-03T10:00:00Z',
  sealed_key: 'sealed',
  spec: cpuModel(model, 'hf://org/repo'),
  retiring: false,
  retire_reason: null,
  retiring_since: null,
  ...extra,
});
const shard = (replicaId: string, model: string, node: string): Shard => ({
  replica: replicaId,
  model,
  profile: 'cpu',
  rank: 0,
  ranks: 1,
  node,
  devices: [],
  port: 9000,
});
const rollout = (model: string, state: RolloutRecord['state']): RolloutRecord => ({
  model,
  change: 'gpus 1 → 2',
  mode: 'surge',
  by: 'admin',
  spec: cpuModel(model, 'hf://org/repo'),
  replica: null,
  profiles: {},
  replaces: 1,
  started_at: '2026-12-03T10:00:00Z',
  state,
  finished_at: state === 'rolling' ? null : '2026-12-03T10:01:00Z',
  error: null,
});
const view = (o: Partial<PlacementView> = {}): PlacementView => ({
  replicas: [],
  shards: [],
  pending: [],
  rollouts: new Map(),
  ...o,
});

const a1 = replica('a-1', 'a');
const b1 = replica('b-1', 'b');
const base = view({ replicas: [a1, b1], shards: [shard('a-1', 'a', 'n1'), shard('b-1', 'b', 'n1')] });

describe('placementChanges', () => {
  it.each<[string, PlacementView, PlacementView, ReturnType<typeof placementChanges>]>([
    ['nothing changed', base, view({ ...base }), { replicas: [], models: [], rollouts: [] }],
    [
      'a replica placed',
      base,
      view({
        ...base,
        replicas: [a1, b1, replica('a-2', 'a')],
        shards: [...base.shards, shard('a-2', 'a', 'n2')],
      }),
      { replicas: ['a-2'], models: ['a'], rollouts: [] },
    ],
    [
      'a replica removed',
      base,
      view({ ...base, replicas: [a1], shards: [shard('a-1', 'a', 'n1')] }),
      { replicas: ['b-1'], models: ['b'], rollouts: [] },
    ],
    [
      'a replica marked to be replaced',
      base,
      view({ ...base, replicas: [a1, replica('b-1', 'b', { retiring: true, retire_reason: 'restart' })] }),
      { replicas: ['b-1'], models: ['b'], rollouts: [] },
    ],
    [
      'a shard moved to another node',
      base,
      view({ ...base, shards: [shard('a-1', 'a', 'n2'), shard('b-1', 'b', 'n1')] }),
      { replicas: ['a-1'], models: ['a'], rollouts: [] },
    ],
    [
      'a model waits for room, for another reason',
      view({ ...base, pending: [{ model: 'c', count: 1, reason: 'no node' }] }),
      view({ ...base, pending: [{ model: 'c', count: 1, reason: 'no free card' }] }),
      { replicas: [], models: ['c'], rollouts: [] },
    ],
    [
      'a rollout started, another ended',
      view({ ...base, rollouts: new Map([['b', rollout('b', 'rolling')]]) }),
      view({
        ...base,
        rollouts: new Map([
          ['a', rollout('a', 'rolling')],
          ['b', rollout('b', 'done')],
        ]),
      }),
      { replicas: [], models: [], rollouts: ['a', 'b'] },
    ],
  ])('%s', (_name, before, after, expected) => {
    expect(placementChanges(before, after)).toEqual(expected);
  });
});

const status = (
  replicaId: string,
  state: ShardStatusWire['state'],
  extra: Partial<ShardStatusWire> = {},
) => ({
  status: { key: `${replicaId}/0`, replica: replicaId, rank: 0, state, restarts: 0, ...extra },
});

describe('statusChanges', () => {
  it.each<[string, [string, ReturnType<typeof status>][], [string, ReturnType<typeof status>][], string[]]>([
    ['the same report', [['a-1/0', status('a-1', 'ready')]], [['a-1/0', status('a-1', 'ready')]], []],
    [
      'a shard became ready',
      [['a-1/0', status('a-1', 'starting')]],
      [['a-1/0', status('a-1', 'ready')]],
      ['a-1'],
    ],
    [
      'a download progressed',
      [['a-1/0', status('a-1', 'downloading', { download: { bytes: 1, total_bytes: 10 } as never })]],
      [['a-1/0', status('a-1', 'downloading', { download: { bytes: 5, total_bytes: 10 } as never })]],
      ['a-1'],
    ],
    ['a shard first reported', [], [['b-1/0', status('b-1', 'starting')]], ['b-1']],
    ['a shard no longer reported', [['b-1/0', status('b-1', 'ready')]], [], ['b-1']],
  ])('%s', (_name, before, after, expected) => {
    expect(statusChanges(new Map(before), new Map(after))).toEqual(expected);
  });
});

function recorder(): EventPublisher & { got: [EventTopic, EventData | undefined][] } {
  const got: [EventTopic, EventData | undefined][] = [];
  return { got, publish: (topic, data) => got.push([topic, data]) };
}

describe('publishStatuses and publishDownloads', () => {
  it("a rolling model's replica changed: replicas and rollouts; none changed: nothing", () => {
    const events = recorder();
    const v = view({
      ...base,
      rollouts: new Map([
        ['a', rollout('a', 'rolling')],
        ['b', rollout('b', 'done')],
      ]),
    });
    publishStatuses(events, [], v);
    expect(events.got).toEqual([]);
    publishStatuses(events, ['a-1', 'b-1'], v);
    expect(events.got).toEqual([
      ['replicas', { replicas: ['a-1', 'b-1'], models: ['a', 'b'] }],
      ['rollouts', { models: ['a'] }],
    ]);
  });

  it("a node's downloads: the replicas of those models", () => {
    const events = recorder();
    publishDownloads(events, [], base);
    publishDownloads(events, [{ model: 'b' }], base);
    expect(events.got).toEqual([['replicas', { replicas: ['b-1'], models: ['b'] }]]);
  });
});
