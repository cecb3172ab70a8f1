import { describe, expect, it } from 'vitest';

import type { ModelSpec } from '../../catalog/model-spec.js';
import type { ReplicaView } from '../../protocol/replica-views.js';
import type { CatalogEntry } from '../../protocol/routes.js';

import { catalogEntry, replicaOfModel } from './route-entries.js';
import { cpuProfile } from '../../../test/support/profiles.js';

const spec: ModelSpec = { name: 'm', source: '/m.gguf', replicas: 1, profiles: [cpuProfile()] };
const view = (over: Partial<ReplicaView>): ReplicaView => ({
  id: 'm-1',
  model: 'm',
  profile: 'cpu',
  engine: 'llamacpp',
  state: 'ready',
  restarts: 0,
  shards: [],
  ...over,
});
const killed = 'llama-server killed by SIGKILL; restarting in 1 s';

describe("a model's catalog entry: unavailable, coming back, or neither", () => {
  const cases: [
    string,
    ModelSpec,
    number,
    ReplicaView[],
    Pick<CatalogEntry, 'unavailable' | 'restarting'>,
  ][] = [
    ['ready', spec, 1, [view({})], {}],
    [
      'its engine restarting: coming back, not unavailable',
      spec,
      1,
      [view({ state: 'failed', reason: killed, restarts: 1, restart_at: '2025-01-01T00:00:01.000Z' })],
      { restarting: { at: '2025-01-01T00:00:01.000Z', reason: `replica m-1 failed: ${killed}` } },
    ],
    [
      'loading again after the restart',
      spec,
      1,
      [view({ state: 'starting', reason: 'loading the model', restarts: 1 })],
      { restarting: { reason: 'replica m-1 is starting again after its engine failed: loading the model' } },
    ],
    [
      'an agent of an earlier version, which does not say: unavailable as before',
      spec,
      1,
      [view({ state: 'failed', reason: killed, restarts: 1 })],
      { unavailable: `replica m-1 failed: ${killed}` },
    ],
    ['starting for the first time: neither', spec, 1, [view({ state: 'starting' })], {}],
    [
      'autoscaled to zero, at zero: neither (the waiting room wakes it)',
      { ...spec, autoscale: { min: 0, max: 1, target: 0.7, idle_s: 300 } },
      0,
      [],
      {},
    ],
  ];
  for (const [what, m, wanted, replicas, entry] of cases) {
    it(what, () => {
      const got = catalogEntry(m, { wanted, replicas: replicas.map(replicaOfModel) });
      expect({ unavailable: got.unavailable, restarting: got.restarting }).toEqual({
        unavailable: undefined,
        restarting: undefined,
        ...entry,
      });
    });
  }
});
