import { describe, expect, it } from 'vitest';

import { unavailableReason, type ModelReplicas } from './availability.js';

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
  ];
  for (const [what, m, reason] of cases) {
    it(what, () => {
      expect(unavailableReason({ model: 'm', ...m })).toBe(reason);
    });
  }
});
