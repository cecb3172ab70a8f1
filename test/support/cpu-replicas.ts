import { expect } from 'vitest';

import type { ReplicaView } from '../../src/protocol/replica-views.js';

import { api, type TestControlPlane } from './control-plane.js';
import { until } from './fleet.js';

/**
 * Adds a model of `replicas` llama.cpp replicas on CPUs over `source` (a local model file) and
 * waits until all of them are ready: the cluster most tests of a roll or a restart start from.
 */
export async function readyCpuReplicas(
  t: Pick<TestControlPlane, 'url' | 'adminKey' | 'cp'>,
  o: { name: string; source: string; replicas: number; context_length?: number },
): Promise<ReplicaView[]> {
  const model = {
    name: o.name,
    source: o.source,
    context_length: o.context_length ?? 2048,
    replicas: o.replicas,
    profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
  };
  const r = await api(t.url, t.adminKey, 'POST', '/models', model);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return until(`${o.replicas} ready replicas of ${o.name}`, () => {
    const list = t.cp.fleet.replicas(o.name);
    return list.length === o.replicas && list.every((x) => x.state === 'ready') ? list : undefined;
  });
}
