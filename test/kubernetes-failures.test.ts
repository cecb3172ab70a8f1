import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../src/catalog/model-spec.js';
import { connectCluster } from '../src/kube/client.js';
import type { Origin } from '../src/models/origin.js';
import type { ReplicaView } from '../src/protocol/replica-views.js';
import { EngineKeys } from '../src/server/fleets/engine-keys.js';
import { KubeFleet } from '../src/server/fleets/kube/kube-fleet.js';
import type { Catalog } from '../src/server/state/catalog.js';
import type { Store } from '../src/store/store.js';

import {
  startFakeKubeApiServer,
  type FakeKubeApiServer,
  type KubeletHook,
} from './fakes/kube-apiserver/index.js';
import { until } from './support/fleet.js';

/**
 * Kubernetes mode when the cluster will not make or start a replica's pods: KubeFleet against
 * the fake API server (test/fakes/kube-apiserver), whose controllers refuse pods as a quota
 * does and whose kubelet fails mounts and pulls as a real one says. Each replica's state and
 * reason must carry the cluster's words, the object's name and what to do.
 */

const ns = 'llmgw';
const h100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' };
const quota =
  'exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2';
const pullError =
  'failed to pull and unpack image "registry.example.com/vllm:v1": failed to authorize: failed to fetch oauth token: unexpected status: 401 Unauthorized';

const profile = (p: Partial<ProfileSpec>): ProfileSpec => ({
  name: 'h100',
  engine: 'vllm',
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  nodes: 1,
  args: [],
  env: {},
  adapters: [],
  gpu_class: 'h100-80g',
  ...p,
});
const model = (name: string, p: Partial<ProfileSpec> = {}): ModelSpec => ({
  name,
  source: 'hf:org/repo',
  replicas: 1,
  profiles: [profile(p)],
});

describe('Kubernetes mode: why a pod is not made or does not start', () => {
  let kube: FakeKubeApiServer;
  let fleet: KubeFleet;
  const specs: ModelSpec[] = [];

  // The kubelet of the fake: by the pod's model, a volume that does not mount or an image that does not pull.
  const kubelet: KubeletHook = (pod) => {
    const m = pod.metadata.labels?.['llmgw.io/model'];
    if (m === 'mount')
      return {
        fails: 'mount',
        message: 'MountVolume.SetUp failed for volume "hub-ca" : secret "hub-ca" not found',
      };
    if (m === 'pull') return { fails: 'image', message: pullError };
    return { ip: '10.0.0.1', ready: true };
  };

  const add = async (spec: ModelSpec) => {
    specs.push(spec);
    await fleet.reconcile();
  };
  const replicaOf = (name: string, test: (r: ReplicaView) => boolean) =>
    until(`a replica of ${name} that says why`, () => fleet.replicas(name).find(test), 10_000);

  beforeAll(async () => {
    kube = await startFakeKubeApiServer({
      namespaces: ['default', ns],
      nodes: ['gpu-1', 'gpu-2'].map((name) => ({
        name,
        labels: h100,
        allocatable: { 'nvidia.com/gpu': '1' },
      })),
      kubelet,
    });
    kube.admitPods((pod) =>
      ['quota', 'grouped'].includes(pod.metadata.labels?.['llmgw.io/model'] ?? '') ? quota : undefined,
    );
    const cluster = await connectCluster(
      { namespace: ns, kubeconfig: await kube.kubeconfig({ namespace: ns }), context: '' },
      { log: pino({ level: 'silent' }) },
    );
    const values = new Map<string, string>();
    const store = {
      shared: {
        get: (k: string) => Promise.resolve(values.get(k)),
        putIfAbsent: (k: string, v: string) => {
          if (!values.has(k)) values.set(k, v);
          return Promise.resolve(values.get(k) ?? v);
        },
      },
    } as unknown as Store;
    const origin = (source: string): Origin => ({
      source,
      kind: 'hf',
      repo: 'org/repo',
      revision: 'main',
      commit: 'a'.repeat(40),
      files: [{ path: 'config.json', size: 1 }],
    });
    const catalog = {
      specs: () => Promise.resolve([...specs]),
      origins: () => Promise.resolve(new Map(specs.map((s) => [s.name, origin(s.source)]))),
    } as unknown as Catalog;
    fleet = new KubeFleet({
      cluster,
      catalog,
      store,
      keys: new EngineKeys('s'.repeat(40), 'test'),
      logger: pino({ level: 'silent' }),
      settings: () => ({
        pods: {
          namespace: ns,
          models: { pvc: 'models', mount_path: '/models', downloader_image: '' },
          runtime_class: '',
          engine_port: 8000,
          service_account: '',
        },
        llamaParallel: 4,
      }),
      intervalMs: 100,
    });
    await fleet.start();
  }, 30_000);
  afterAll(async () => {
    await fleet.stop();
    await kube.close();
  });

  it("quotes the ReplicaSet's FailedCreate when a quota refuses the pod, with what to do", async () => {
    await add(model('quota'));
    const r = await replicaOf('quota', (x) => x.state === 'failed');
    expect(r.id).toBeNull();
    expect(r.reason).toMatch(
      /^ReplicaSet llmgw-quota-h100-[a-z0-9]+: FailedCreate: Error creating: pods "llmgw-quota-h100-[a-z0-9]+-[a-z0-9]{5}" is forbidden: exceeded quota: gpus, requested: requests\.nvidia\.com\/gpu=1/,
    );
    expect(r.reason).toContain(
      " — raise the namespace's ResourceQuota (kubectl describe resourcequota) or lower the model's requests",
    );
    // The Deployment carries the ReplicaSet's condition, as the deployment controller copies it.
    const d = kube.get('Deployment', ns, 'llmgw-quota-h100');
    expect(d?.status.conditions).toContainEqual(
      expect.objectContaining({ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate' }),
    );
    // The route table says the same of the model's pending replica.
    const entry = (await fleet.routeTable()).models.find((m) => m.name === 'quota');
    expect(JSON.stringify(entry)).toContain('exceeded quota: gpus');
  });

  it("keeps the scheduler's words for a pod no node takes, and says what to do", async () => {
    await add(model('big', { gpus_per_node: 2 }));
    const r = await replicaOf('big', (x) => x.id !== null && x.state === 'pending');
    expect(r.reason).toMatch(/^0\/2 nodes are available: 2 Insufficient nvidia\.com\/gpu/);
    expect(r.reason).toContain(
      " — no node has a free nvidia.com/gpu: add GPU nodes or free some, or lower the profile's GPU count",
    );
  });

  it("fails a replica whose volume does not mount, quoting the pod's FailedMount", async () => {
    await add(model('mount'));
    const r = await replicaOf('mount', (x) => x.id !== null && x.state === 'failed');
    expect(r.reason).toBe(
      `pod ${r.id ?? ''}: FailedMount: MountVolume.SetUp failed for volume "hub-ca" : secret "hub-ca" not found — create the Secret "hub-ca" in the namespace, or fix the name that refers to it`,
    );
  });

  it("adds the registry's answer to an image pull's back-off, and what to do", async () => {
    await add(model('pull'));
    const r = await replicaOf('pull', (x) => x.state === 'failed' && (x.reason ?? '').includes('kubelet'));
    expect(r.reason).toMatch(/^engine: ImagePullBackOff: Back-off pulling image "[^"]+"; the kubelet: /);
    expect(r.reason).toContain(`Failed to pull image "`);
    expect(r.reason).toContain('401 Unauthorized');
    expect(r.reason).toContain(
      " — the registry refuses the credentials: check the image pull secret (it may be missing or hold another registry's)",
    );
  });

  it("quotes a LeaderWorkerSet's StatefulSet's FailedCreate when a quota refuses its leader", async () => {
    await add(model('grouped', { name: 'two', nodes: 2 }));
    const r = await replicaOf('grouped', (x) => x.state === 'failed');
    expect(r.id).toBeNull();
    expect(r.reason).toBe(
      `StatefulSet llmgw-grouped-two: FailedCreate: create Pod llmgw-grouped-two-0 in StatefulSet llmgw-grouped-two failed error: pods "llmgw-grouped-two-0" is forbidden: ${quota} — raise the namespace's ResourceQuota (kubectl describe resourcequota) or lower the model's requests`,
    );
  });

  it('says it waits for Kubernetes once the quota admits the pods', async () => {
    kube.admitPods(undefined);
    const r = await replicaOf('quota', (x) => x.id !== null);
    expect(r.reason ?? '').not.toContain('exceeded quota');
  });
});
