import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { connectCluster, type KubeCluster } from '../src/kube/client.js';
import type { LeaderWorkerSet } from '../src/kube/manifests.js';
import { managedBy } from '../src/kube/names.js';

import { startFakeKubeApiServer, type FakeKubeApiServer } from './fakes/kube-apiserver/index.js';

/**
 * llmgw's informers against the fake API server's failures: a watch that goes silent, one
 * answered 500, a connection reset; and the refusal of a custom resource's unconditional update.
 */

const ns = 'llmgw';
// The server ends each watch after 1 s; one open past 1.5 s is taken as dead.
const watch = { timeoutSeconds: 1, marginMs: 500, retryMs: 100 };

describe('Kubernetes watches', () => {
  let kube: FakeKubeApiServer;
  let kubeconfig: string;
  let cluster: KubeCluster | undefined;
  let logs: { level: 'warn' | 'info'; resource: string; kind?: string; msg: string }[];
  let n = 0;

  const connect = async () => {
    logs = [];
    const entry =
      (level: 'warn' | 'info') =>
      (o: object, msg: string): void => {
        logs.push({ level, ...(o as { resource: string; kind?: string }), msg });
      };
    cluster = await connectCluster(
      { namespace: ns, kubeconfig, context: '' },
      { log: { warn: entry('warn'), info: entry('info') }, watch },
    );
    return cluster;
  };
  const createPod = () => {
    const name = `p${n++}`;
    kube.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, labels: { [managedBy.key]: managedBy.value } },
      spec: { containers: [{ name: 'engine', image: 'vllm:1' }] },
    });
    return name;
  };
  const sees = (c: KubeCluster, name: string) =>
    kube.waitFor(() => c.pods().some((p) => p.metadata?.name === name), 5000);

  beforeAll(async () => {
    kube = await startFakeKubeApiServer({
      namespaces: ['default', ns],
      controllers: { deployments: false, leaderWorkerSets: false, scheduler: false, kubelet: false },
      bookmarkIntervalMs: 100,
    });
    kubeconfig = await kube.kubeconfig({ namespace: ns });
  });
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
    kube.failWatches(0);
  });
  afterAll(async () => {
    await kube.close();
  });

  it('asks for bookmarks and resumes from theirs: no 410 after the history is forgotten', async () => {
    const c = await connect();
    // Changes llmgw's selectors leave out move the resourceVersion on; only bookmarks tell it so.
    for (let i = 0; i < 3; i++)
      kube.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `other${i}`, namespace: ns } });
    await new Promise((r) => setTimeout(r, 300));
    const gone = kube.watchStats.gone;
    kube.compact();
    kube.dropWatches();
    const name = createPod();
    await sees(c, name);
    expect(kube.watchStats.gone).toBe(gone);
  });

  it('restarts a silent watch within its deadline, and sees what changed meanwhile', async () => {
    const c = await connect();
    kube.silenceWatches();
    const silencedAt = Date.now();
    const name = createPod();
    await sees(c, name);
    // Deadline (1.5 s) + a pause (0.1 s) + a list and a watch; well short of TCP keepalive.
    expect(Date.now() - silencedAt).toBeLessThan(4000);
    const pods = logs.filter((l) => l.resource === 'pods' && l.level === 'warn');
    expect(pods).toEqual([
      {
        level: 'warn',
        resource: 'pods',
        kind: 'silent',
        msg: 'watching pods failed: the watch was still open after 1.5 s though the server was asked to end it after 1 s: its connection is taken as dead; llmgw lists and watches again every 0.1 s until it works',
      },
    ]);
  });

  it('lists again after a watch fails with 500 or its connection breaks', async () => {
    const c = await connect();
    const lists = kube.watchStats.lists;
    kube.failWatches(2);
    kube.resetWatches();
    const name = createPod();
    await sees(c, name);
    // Each informer (nodes, pods, deployments, leaderworkersets) listed again.
    await kube.waitFor(() => kube.watchStats.lists >= lists + 4, 5000);
    expect(logs.some((l) => l.resource === 'pods' && l.level === 'warn')).toBe(true);
  });

  it('logs a failure once while it lasts, and once when the watch works again', async () => {
    const c = await connect();
    kube.failWatches(1_000_000);
    kube.dropWatches();
    const lists = kube.watchStats.lists;
    // Many tries (each lists again) while every watch is refused.
    await kube.waitFor(() => kube.watchStats.lists >= lists + 20, 10_000);
    kube.failWatches(0);
    const name = createPod();
    await sees(c, name);
    await kube.waitFor(() => logs.some((l) => l.resource === 'pods' && l.level === 'info'), 5000);
    expect(logs.filter((l) => l.resource === 'pods').map((l) => [l.level, l.kind ?? ''])).toEqual([
      ['warn', 'http 500'],
      ['info', ''],
    ]);
    const [warn, info] = logs.filter((l) => l.resource === 'pods');
    expect(warn?.msg).toBe(
      'watching pods failed: the API server answered 500: Internal error occurred: etcdserver: request timed out; llmgw lists and watches again every 0.1 s until it works',
    );
    expect(info?.msg).toMatch(/^watching pods works again \(after \d+ failed tries\)$/);
  });

  it('refuses a LeaderWorkerSet update without resourceVersion; llmgw sends the current one', async () => {
    const c = await connect();
    const lws = (image: string): LeaderWorkerSet => ({
      apiVersion: 'leaderworkerset.x-k8s.io/v1',
      kind: 'LeaderWorkerSet',
      metadata: { name: 'big', namespace: ns, labels: { [managedBy.key]: managedBy.value } },
      spec: {
        replicas: 1,
        leaderWorkerTemplate: {
          size: 2,
          leaderTemplate: { spec: { containers: [{ name: 'engine', image }] } },
          workerTemplate: { spec: { containers: [{ name: 'engine', image }] } },
        },
      },
    });
    await c.apply(lws('sglang:1'));
    const put = await fetch(
      `${kube.url}/apis/leaderworkerset.x-k8s.io/v1/namespaces/${ns}/leaderworkersets/big`,
      {
        method: 'PUT',
        headers: { authorization: `Bearer ${kube.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(lws('sglang:2')),
      },
    );
    expect(put.status).toBe(422);
    const status = (await put.json()) as { reason: string; message: string };
    expect(status.reason).toBe('Invalid');
    expect(status.message).toBe(
      'leaderworkersets.leaderworkerset.x-k8s.io "big" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
    );
    await c.apply(lws('sglang:2'));
    const stored = kube.get('LeaderWorkerSet', ns, 'big') as unknown as LeaderWorkerSet;
    expect(stored.spec.leaderWorkerTemplate.workerTemplate.spec?.containers[0]?.image).toBe('sglang:2');
  });
});
