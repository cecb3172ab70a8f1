import { describe, expect, it } from 'vitest';

import { restartingOf, unavailableReason, type ModelReplicas } from './availability.js';

describe('whether a model can serve, for the gateway', () => {
  const cases: [string, Omit<ModelReplicas, 'model'>, string | undefined][] = [
    ['a ready replica', { wanted: 1, replicas: [{ id: 'm-1', state: 'ready' }] }, undefined],
    [
      'a degraded one serves',
      { wanted: 1, replicas: [{ id: 'm-1', state: 'degraded', reason: 'slow' }] },
      undefined,
    ],
    [
      'starting: wait for it',
      { wanted: 1, replicas: [{ id: 'm-1', state: 'starting', reason: 'loading' }] },
      undefined,
    ],
    [
      'fetching its files: wait',
      {
        wanted: 1,
        replicas: [{ id: 'm-1', state: 'downloading', reason: 'downloading hf://a/b (1.0 GB of 4.7 GB)' }],
      },
      undefined,
    ],
    [
      'not placed yet: wait',
      { wanted: 1, replicas: [{ id: 'm-1', state: 'pending', reason: 'not placed' }] },
      undefined,
    ],
    [
      'its node not heard from yet (an agent reconnecting): wait',
      { wanted: 1, replicas: [{ id: 'm-1', state: 'unknown', reason: 'node a is not ready' }] },
      undefined,
    ],
    [
      'one failed, one starting: wait',
      {
        wanted: 2,
        replicas: [
          { id: 'm-1', state: 'failed', reason: 'exited' },
          { id: 'm-2', state: 'starting' },
        ],
      },
      undefined,
    ],
    ['nothing placed yet, none waiting: placement has not run', { wanted: 1, replicas: [] }, undefined],
    [
      'all failed',
      {
        wanted: 1,
        replicas: [
          { id: 'm-1', state: 'failed', reason: "exited with code 1: couldn't bind; restarting in 60 s" },
        ],
      },
      "replica m-1 failed: exited with code 1: couldn't bind; restarting in 60 s",
    ],
    [
      'all failed, several',
      {
        wanted: 3,
        replicas: [
          { id: 'm-1', state: 'failed', reason: 'oom' },
          { id: 'm-2', state: 'failed' },
          { id: 'm-3', state: 'failed' },
        ],
      },
      'replica m-1 failed: oom (and 2 more failed)',
    ],
    [
      'waiting for room',
      { wanted: 1, replicas: [], pending: { count: 1, reason: 'no ready node has a free l4-24g' } },
      '1 replica waits for room: no ready node has a free l4-24g',
    ],
    [
      'failed, and the rest waiting for room',
      {
        wanted: 3,
        replicas: [{ id: 'm-1', state: 'failed', reason: 'oom' }],
        pending: { count: 2, reason: 'no room' },
      },
      'replica m-1 failed: oom; 2 replicas wait for room: no room',
    ],
    ['scaled to none', { wanted: 0, replicas: [] }, 'it is scaled to 0 replicas (llmgw ctl model scale m 1)'],
    [
      'failed, its agent starting it again by itself: wait',
      {
        wanted: 1,
        replicas: [
          {
            id: 'm-1',
            state: 'failed',
            reason: 'llama-server killed by SIGKILL; restarting in 1 s',
            restarts: 1,
            restart_at: '2025-01-01T00:00:01.000Z',
          },
        ],
      },
      undefined,
    ],
    [
      'one failed for good, one restarting: wait',
      {
        wanted: 2,
        replicas: [
          { id: 'm-1', state: 'failed', reason: 'the weights are not on node a' },
          { id: 'm-2', state: 'failed', reason: 'oom', restart_at: '2025-01-01T00:00:01.000Z' },
        ],
      },
      undefined,
    ],
  ];
  for (const [what, m, reason] of cases) {
    it(what, () => {
      expect(unavailableReason({ model: 'm', ...m })).toBe(reason);
    });
  }
});

describe('whether a model none of whose replicas serves is coming back by itself', () => {
  const failed = (id: string, at?: string) => ({
    id,
    state: 'failed' as const,
    reason: 'llama-server killed by SIGKILL; restarting in 1 s',
    restarts: 1,
    ...(at === undefined ? {} : { restart_at: at }),
  });
  const cases: [string, ModelReplicas['replicas'], ReturnType<typeof restartingOf>][] = [
    [
      'its engine restarts at a known time',
      [failed('m-1', '2025-01-01T00:00:01.000Z')],
      {
        at: '2025-01-01T00:00:01.000Z',
        reason: 'replica m-1 failed: llama-server killed by SIGKILL; restarting in 1 s',
      },
    ],
    [
      'the soonest of several restarts',
      [failed('m-1', '2025-01-01T00:00:08.000Z'), failed('m-2', '2025-01-01T00:00:02.000Z')],
      {
        at: '2025-01-01T00:00:02.000Z',
        reason: 'replica m-2 failed: llama-server killed by SIGKILL; restarting in 1 s',
      },
    ],
    [
      'loading again after a restart: any moment now',
      [
        failed('m-1', '2025-01-01T00:00:08.000Z'),
        { id: 'm-2', state: 'starting', reason: 'loading the model', restarts: 2 },
      ],
      { reason: 'replica m-2 is starting again after its engine failed: loading the model' },
    ],
    [
      'starting for the first time: not a restart',
      [{ id: 'm-1', state: 'starting', restarts: 0 }],
      undefined,
    ],
    ['failed with no restart coming', [failed('m-1')], undefined],
    [
      'another replica serves: the router has it',
      [failed('m-1', '2025-01-01T00:00:01.000Z'), { id: 'm-2', state: 'degraded', reason: 'slow' }],
      undefined,
    ],
    ['nothing placed', [], undefined],
  ];
  for (const [what, replicas, restarting] of cases) {
    it(what, () => {
      expect(restartingOf({ replicas })).toEqual(restarting);
    });
  }
});
