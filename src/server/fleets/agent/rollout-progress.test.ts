import { describe, expect, it } from 'vitest';

import type { ModelSpec } from '../../../catalog/model-spec.js';

import { rolloutProgress, type RolloutProgress } from './rollout-progress.js';
import { cpuProfile } from '../../../../test/support/profiles.js';

const profile = cpuProfile();
const before: ModelSpec = { name: 'm', source: '/m.gguf', replicas: 2, profiles: [profile] };
const after: ModelSpec = { ...before, context_length: 8192 };
const started = '2026-03-01T12:00:00.000Z';
const earlier = '2026-03-01T11:00:00.000Z';
const later = '2026-03-01T12:01:00.000Z';

const replica = (id: string, spec: ModelSpec, created_at: string, retiring = false) => ({
  id,
  model: 'm',
  profile: 'cpu',
  spec,
  created_at,
  retiring,
});

const change = { spec: after, replaces: 2, started_at: started };
const restart = { spec: before, replaces: 1, started_at: started };

const cases: [
  string,
  Parameters<typeof rolloutProgress>[0],
  ModelSpec,
  ReturnType<typeof replica>[],
  { ready?: string[]; failed?: Record<string, string> },
  RolloutProgress,
][] = [
  [
    'none replaced yet: rolling',
    change,
    after,
    [replica('m-1', before, earlier, true), replica('m-2', before, earlier), replica('m-3', after, later)],
    { ready: ['m-1', 'm-2'] },
    { replaced: 0, total: 2 },
  ],
  [
    'one of two replaced',
    change,
    after,
    [replica('m-2', before, earlier, true), replica('m-3', after, later), replica('m-4', after, later)],
    { ready: ['m-2', 'm-3'] },
    { replaced: 1, total: 2 },
  ],
  [
    'every replica runs the change and is ready, none being replaced: done',
    change,
    after,
    [replica('m-3', after, later), replica('m-4', after, later)],
    { ready: ['m-3', 'm-4'] },
    { replaced: 2, total: 2, end: { state: 'done' } },
  ],
  [
    'a change of a profile no replica runs restarts none: done at once',
    { ...change, replaces: 0 },
    after,
    [replica('m-1', after, earlier), replica('m-2', after, earlier)],
    { ready: ['m-1', 'm-2'] },
    { replaced: 0, total: 0, end: { state: 'done' } },
  ],
  [
    'a successor failed: failed, with the replica and its engine error',
    change,
    after,
    [replica('m-1', before, earlier, true), replica('m-2', before, earlier), replica('m-3', after, later)],
    { ready: ['m-1', 'm-2'], failed: { 'm-3': 'llama-server exited with code 1' } },
    {
      replaced: 0,
      total: 2,
      end: { state: 'failed', error: 'replica m-3: llama-server exited with code 1' },
    },
  ],
  [
    'an old replica failing is no failure of the change',
    change,
    after,
    [replica('m-1', before, earlier, true), replica('m-3', after, later)],
    { ready: [], failed: { 'm-1': 'exited' } },
    { replaced: 0, total: 2 },
  ],
  [
    'the model changed again before it was done: failed, naming that',
    change,
    { ...after, context_length: 4096 },
    [replica('m-3', after, later)],
    { ready: ['m-3'] },
    {
      replaced: 1,
      total: 2,
      end: {
        state: 'failed',
        error: 'model m was changed again before this change was done: the newer change rolls on',
      },
    },
  ],
  [
    'scaled during the roll: it goes on, to the new count',
    change,
    { ...after, replicas: 1 },
    [replica('m-3', after, later)],
    { ready: ['m-3'] },
    { replaced: 1, total: 1, end: { state: 'done' } },
  ],
  [
    'a restart: one replica, done once a replica made since is ready and the restarted one is gone',
    restart,
    before,
    [replica('m-2', before, earlier), replica('m-3', before, later)],
    { ready: ['m-2', 'm-3'] },
    { replaced: 1, total: 1, end: { state: 'done' } },
  ],
  [
    'a restart whose successor is ready while the restarted one still stops: rolling',
    restart,
    before,
    [replica('m-1', before, earlier, true), replica('m-2', before, earlier), replica('m-3', before, later)],
    { ready: ['m-1', 'm-2', 'm-3'] },
    { replaced: 1, total: 1 },
  ],
];

describe('rolloutProgress', () => {
  it.each(cases)('%s', (_what, rollout, spec, replicas, o, expected) => {
    expect(
      rolloutProgress(rollout, spec, replicas, {
        isReady: (id) => o.ready?.includes(id) ?? false,
        failure: (id) => o.failed?.[id],
      }),
    ).toEqual(expected);
  });
});
