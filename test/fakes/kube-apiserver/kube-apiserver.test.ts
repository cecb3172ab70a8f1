/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment, @typescript-eslint/no-misused-spread -- client-node's
   models are classes, but its API takes and returns plain JSON objects. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type * as k8sTypes from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeKubeApiServer, type KubeObject, startFakeKubeApiServer, validateObject } from './index.js';

type K8s = typeof k8sTypes;

/** A fake engine: answers /health with 200 once `ready` is set. */
async function startEngine(host: string) {
  const state = { ready: true, hits: 0 };
  const server: Server = createServer((req, res) => {
    state.hits++;
    res.writeHead(req.url === '/health' && state.ready ? 200 : 503).end();
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    state,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const deployment = (name: string, replicas: number, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, labels: { app: name } },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: {
        containers: [
          {
            name: 'engine',
            image: 'vllm/vllm-openai:v0.11.0',
            ports: [{ name: 'http', containerPort: 8000 }],
            readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 5 },
            resources: { limits: { 'nvidia.com/gpu': '1' } },
            ...extra,
          },
        ],
      },
    },
  },
});

const status = (e: any) => (typeof e.body === 'string' ? JSON.parse(e.body) : e.body);

describe('fake kube-apiserver through @kubernetes/client-node', () => {
  let kube: FakeKubeApiServer;
  let k8s: K8s;
  let kc: InstanceType<K8s['KubeConfig']>;
  const engines: Awaited<ReturnType<typeof startEngine>>[] = [];
  let nextIp = 10;

  beforeAll(async () => {
    k8s = await import('@kubernetes/client-node');
    kube = await startFakeKubeApiServer({
      bookmarkIntervalMs: 100,
      nodes: [
        {
          name: 'gpu-a',
          labels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' },
          allocatable: { 'nvidia.com/gpu': 2 },
        },
        {
          name: 'mig-b',
          labels: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' },
          allocatable: { 'nvidia.com/mig-3g.40gb': 2 },
        },
        { name: 'cpu-c', taints: [{ key: 'dedicated', value: 'infra', effect: 'NoSchedule' }] },
      ],
      // Each pod's "containers" are a real HTTP server on its own loopback address.
      kubelet: async () => {
        const ip = `127.0.0.${nextIp++}`;
        const engine = await startEngine(ip);
        engines.push(engine);
        return { ip, ports: { 8000: engine.port }, stop: engine.close, logs: () => `engine on ${ip}\n` };
      },
    });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(await kube.kubeconfig());
  });
  afterAll(async () => {
    await kube.close();
  });

  it('lists and creates through CoreV1Api, with real Status errors', async () => {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const nodes = await core.listNode();
    expect(nodes.items.map((n) => n.metadata?.name)).toEqual(['cpu-c', 'gpu-a', 'mig-b']);
    expect(Number(nodes.metadata?.resourceVersion)).toBeGreaterThan(1000);
    await core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'engine-key' }, stringData: { key: 'k' } },
    });
    const err = await core
      .createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'engine-key' } } })
      .catch((e: unknown) => e);
    expect((err as any).code).toBe(409);
    expect(status(err)).toMatchObject({
      kind: 'Status',
      reason: 'AlreadyExists',
      message: 'secrets "engine-key" already exists',
    });
    const missing = await core
      .readNamespacedPod({ namespace: 'default', name: 'nope' })
      .catch((e: unknown) => e);
    expect((missing as any).code).toBe(404);
    expect(status(missing).message).toBe('pods "nope" not found');
  });

  it('runs a deployment: pods created, scheduled onto GPU nodes, ready through the kubelet hook and its probe', async () => {
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    await apps.createNamespacedDeployment({ namespace: 'default', body: deployment('llm', 2) });
    const pods = await kube.waitFor(() => {
      const ps = kube.objects('Pod', 'default').filter((p) => p.metadata.labels?.['app'] === 'llm');
      return (
        ps.length === 2 &&
        ps.every((p) => p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')) &&
        ps
      );
    });
    for (const p of pods) {
      expect(p.metadata.name).toMatch(/^llm-[b-z2-9]{10}-[b-z2-9]{5}$/);
      expect(p.metadata.labels?.['pod-template-hash']).toMatch(/^[b-z2-9]{10}$/);
      expect(p.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'ReplicaSet', controller: true });
      expect(p.spec.nodeName).toBe('gpu-a');
      expect(p.status.podIP).toMatch(/^127\.0\.0\.\d+$/);
    }
    const d = await kube.waitFor(() => {
      const x = kube.get('Deployment', 'default', 'llm');
      return x?.status?.readyReplicas === 2 && x;
    });
    expect(d.status).toMatchObject({
      replicas: 2,
      updatedReplicas: 2,
      availableReplicas: 2,
      observedGeneration: 1,
    });
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const log = await core.readNamespacedPodLog({ namespace: 'default', name: pods[0]!.metadata.name });
    expect(log).toMatch(/^engine on 127\.0\.0\./);
  });

  it('follows the readiness probe, stops a deleted pod through the hook, and rolls a template change', async () => {
    const ready = (p: KubeObject | undefined) =>
      p?.status?.conditions?.find((c: any) => c.type === 'Ready')?.status === 'True';
    const pods = () => kube.objects('Pod', 'default').filter((p) => p.metadata.labels?.['app'] === 'llm');
    const first = pods()[0]!;
    const ip = first.status.podIP as string;
    const mine = engines[Number(ip.split('.')[3]) - 10]!;
    mine.state.ready = false;
    await kube.waitFor(() => !ready(kube.get('Pod', 'default', first.metadata.name)), 3000);
    mine.state.ready = true;
    await kube.waitFor(() => ready(kube.get('Pod', 'default', first.metadata.name)), 3000);
    // A deleted pod is terminating (deletionTimestamp) until the hook's stop returns, then replaced.
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const deleted = await core.deleteNamespacedPod({ namespace: 'default', name: first.metadata.name });
    expect(deleted.metadata?.deletionTimestamp).toBeDefined();
    await kube.waitFor(() => !kube.get('Pod', 'default', first.metadata.name));
    await kube.waitFor(() => pods().length === 2 && pods().every(ready) && pods());
    // A new template: a new ReplicaSet's pods come up, the old ones go. Both GPUs are taken, so no pod can
    // surge: one old pod at a time makes room (with the default 25% surge the rollout would wait, as it would
    // on a real cluster).
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    await apps.patchNamespacedDeployment(
      {
        namespace: 'default',
        name: 'llm',
        body: {
          spec: {
            strategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
            template: { metadata: { annotations: { rev: '2' } } },
          },
        },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
    );
    const rolled = await kube.waitFor(() => {
      const d = kube.get('Deployment', 'default', 'llm');
      const ps = pods();
      return (
        d?.status?.updatedReplicas === 2 &&
        d.status.readyReplicas === 2 &&
        ps.length === 2 &&
        ps.every((p) => p.metadata.annotations?.['rev'] === '2' && ready(p)) &&
        d
      );
    });
    expect(rolled.metadata.generation).toBe(2);
    expect(
      kube
        .objects('ReplicaSet', 'default')
        .filter((r) => r.metadata.name.startsWith('llm-'))
        .map((r) => r.spec.replicas)
        .sort(),
    ).toEqual([0, 2]);
  });

  it('reports an unschedulable pod with the scheduler message and a FailedScheduling event', async () => {
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const body = deployment('big', 1);
    (body.spec.template.spec.containers[0] as any).resources = { limits: { 'nvidia.com/gpu': '4' } };
    (body.spec.template.spec as any).nodeSelector = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' };
    await apps.createNamespacedDeployment({ namespace: 'default', body: body });
    const pod = await kube.waitFor(() =>
      kube
        .objects('Pod', 'default')
        .find(
          (p) =>
            p.metadata.labels?.['app'] === 'big' &&
            p.status?.conditions?.some((c: any) => c.reason === 'Unschedulable'),
        ),
    );
    const cond = pod.status.conditions.find((c: any) => c.type === 'PodScheduled');
    expect(cond).toMatchObject({ status: 'False', reason: 'Unschedulable' });
    expect(cond.message).toBe(
      "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: infra}. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
    );
    const events = kube.events({ reason: 'FailedScheduling', involvedName: pod.metadata.name });
    expect(events[0]).toMatchObject({
      type: 'Warning',
      message: cond.message,
      involvedObject: { kind: 'Pod' },
    });
  });

  it('schedules a MIG request onto the node that advertises the MIG resource', async () => {
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const body = deployment('mig', 1);
    (body.spec.template.spec.containers[0] as any).resources = { limits: { 'nvidia.com/mig-3g.40gb': '1' } };
    await apps.createNamespacedDeployment({ namespace: 'default', body: body });
    const pod = await kube.waitFor(() =>
      kube.objects('Pod', 'default').find((p) => p.metadata.labels?.['app'] === 'mig' && p.spec.nodeName),
    );
    expect(pod.spec.nodeName).toBe('mig-b');
  });

  it('keeps an informer in step: ADDED, MODIFIED, DELETED, and a relist after 410 Gone', async () => {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const informer = k8s.makeInformer(
      kc,
      '/api/v1/namespaces/default/pods',
      () => core.listNamespacedPod({ namespace: 'default', labelSelector: 'app=inf' }),
      'app=inf',
    );
    const seen: string[] = [];
    informer.on('add', (p) => seen.push(`add ${p.metadata!.name!}`));
    informer.on('update', (p) => seen.push(`update ${p.metadata!.name!}`));
    informer.on('delete', (p) => seen.push(`delete ${p.metadata!.name!}`));
    await informer.start();
    const pod = (name: string) => ({
      metadata: { name, labels: { app: 'inf' } },
      spec: { containers: [{ name: 'c', image: 'x:1' }] },
    });
    await core.createNamespacedPod({ namespace: 'default', body: pod('inf-1') });
    await kube.waitFor(() => seen.includes('add inf-1') && seen.includes('update inf-1'));
    await core.deleteNamespacedPod({ namespace: 'default', name: 'inf-1', gracePeriodSeconds: 0 });
    await kube.waitFor(() => seen.includes('delete inf-1'));
    // The watch drops while changes happen and the history is compacted: the informer's reconnect from its
    // resourceVersion gets 410 Gone, and it relists.
    kube.dropWatches();
    kube.create({ apiVersion: 'v1', kind: 'Pod', ...pod('inf-2') });
    kube.compact();
    await kube.waitFor(() => informer.list().some((p) => p.metadata?.name === 'inf-2'));
    expect(kube.watchStats.gone).toBe(1);
    expect(seen).toContain('add inf-2');
    await informer.stop();
  });

  it('serves LeaderWorkerSets through CustomObjectsApi with the controller real labels', async () => {
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'leaderworkerset.x-k8s.io',
      version: 'v1',
      namespace: 'default',
      plural: 'leaderworkersets',
      body: {
        apiVersion: 'leaderworkerset.x-k8s.io/v1',
        kind: 'LeaderWorkerSet',
        metadata: { name: 'big-model' },
        spec: {
          replicas: 1,
          leaderWorkerTemplate: {
            size: 2,
            workerTemplate: {
              spec: {
                containers: [
                  { name: 'engine', image: 'sglang:1', resources: { limits: { 'nvidia.com/gpu': '1' } } },
                ],
              },
            },
          },
        },
      },
    });
    const pods = await kube.waitFor(() => {
      const ps = kube
        .objects('Pod', 'default')
        .filter((p) => p.metadata.labels?.['leaderworkerset.sigs.k8s.io/name'] === 'big-model');
      return ps.length === 2 && ps;
    });
    expect(pods.map((p) => p.metadata.name).sort()).toEqual(['big-model-0', 'big-model-0-1']);
    expect(pods.find((p) => p.metadata.name === 'big-model-0-1')!.metadata.labels).toMatchObject({
      'leaderworkerset.sigs.k8s.io/group-index': '0',
      'leaderworkerset.sigs.k8s.io/worker-index': '1',
    });
    const lws: any = await custom.getNamespacedCustomObject({
      group: 'leaderworkerset.x-k8s.io',
      version: 'v1',
      namespace: 'default',
      plural: 'leaderworkersets',
      name: 'big-model',
    });
    expect(lws.kind).toBe('LeaderWorkerSet');
  });

  it('scales a LeaderWorkerSet through /scale and recreates a group that lost a pod', async () => {
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const lws = {
      group: 'leaderworkerset.x-k8s.io',
      version: 'v1',
      namespace: 'default',
      plural: 'leaderworkersets',
      name: 'big-model',
    };
    await custom.patchNamespacedCustomObjectScale(
      { ...lws, body: { spec: { replicas: 2 } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    // Group 1 wants 2 GPUs the H100 node no longer has (the llm deployment holds both): its leader waits.
    const pending = await kube.waitFor(() => {
      const p = kube.get('Pod', 'default', 'big-model-1');
      return p?.status?.conditions?.some((c: any) => c.reason === 'Unschedulable') && p;
    });
    expect(pending.metadata.labels).toMatchObject({
      'leaderworkerset.sigs.k8s.io/group-index': '1',
      'leaderworkerset.sigs.k8s.io/worker-index': '0',
    });
    const scale: any = await custom.getNamespacedCustomObjectScale(lws);
    expect(scale).toMatchObject({
      kind: 'Scale',
      spec: { replicas: 2 },
      status: {
        selector: 'leaderworkerset.sigs.k8s.io/name=big-model,leaderworkerset.sigs.k8s.io/worker-index=0',
      },
    });
    await custom.patchNamespacedCustomObjectScale(
      { ...lws, body: { spec: { replicas: 1 } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await kube.waitFor(() => !kube.get('Pod', 'default', 'big-model-1'));
    const worker = kube.get('Pod', 'default', 'big-model-0-1')!;
    kube.deletePod('default', 'big-model-0-1', { gracePeriodSeconds: 0 });
    const leader = kube.get('Pod', 'default', 'big-model-0')!;
    await kube.waitFor(() => {
      const l = kube.get('Pod', 'default', 'big-model-0');
      const w = kube.get('Pod', 'default', 'big-model-0-1');
      return l && w && l.metadata.uid !== leader.metadata.uid && w.metadata.uid !== worker.metadata.uid;
    });
  });

  it('watches with selectors and bookmarks over plain HTTP, and cascades a deployment deletion', async () => {
    const ac = new AbortController();
    const res = await fetch(
      `${kube.url}/api/v1/namespaces/default/events?watch=true&allowWatchBookmarks=true&fieldSelector=involvedObject.name=sel-1,reason=Scheduled&resourceVersion=${kube.resourceVersion}`,
      { headers: { authorization: `Bearer ${kube.token!}` }, signal: ac.signal },
    );
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'sel-1' }, spec: { containers: [{ name: 'c', image: 'x:1' }] } },
    });
    let text = '';
    while (!text.includes('BOOKMARK')) text += (await reader.read()).value ?? '';
    const events = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events[0]).toMatchObject({
      type: 'ADDED',
      object: { kind: 'Event', reason: 'Scheduled', involvedObject: { name: 'sel-1' } },
    });
    expect(events.at(-1)).toMatchObject({
      type: 'BOOKMARK',
      object: { kind: 'Event', metadata: { resourceVersion: expect.any(String) } },
    });
    ac.abort();

    kube.crashPod('default', 'sel-1', { exitCode: 137, reason: 'OOMKilled' });
    const crashed = kube.get('Pod', 'default', 'sel-1')!.status.containerStatuses[0];
    expect(crashed).toMatchObject({
      ready: false,
      restartCount: 1,
      state: { waiting: { reason: 'CrashLoopBackOff' } },
      lastState: { terminated: { exitCode: 137, reason: 'OOMKilled' } },
    });
    kube.setPodReady('default', 'sel-1', true);
    expect(kube.get('Pod', 'default', 'sel-1')!.status.containerStatuses[0]).toMatchObject({
      ready: true,
      restartCount: 1,
      state: { running: {} },
    });
    kube.setPodReady('default', 'sel-1', false);
    expect(
      kube.get('Pod', 'default', 'sel-1')!.status.conditions.find((c: any) => c.type === 'Ready').status,
    ).toBe('False');

    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const out = await apps.deleteNamespacedDeployment({
      namespace: 'default',
      name: 'mig',
      propagationPolicy: 'Foreground',
    });
    expect(out).toMatchObject({
      kind: 'Status',
      status: 'Success',
      details: { name: 'mig', group: 'apps', kind: 'deployments' },
    });
    await kube.waitFor(
      () => !kube.objects('Pod', 'default').some((p) => p.metadata.labels?.['app'] === 'mig'),
    );
    expect(kube.objects('ReplicaSet', 'default').filter((r) => r.metadata.name.startsWith('mig-'))).toEqual(
      [],
    );
  });

  it('folds stringData into data, and follows nodes going unready and away', async () => {
    const secret = kube.get('Secret', 'default', 'engine-key')!;
    expect(secret['data']).toEqual({ key: Buffer.from('k').toString('base64') });
    expect(secret).not.toHaveProperty('stringData');

    const ready = (p: KubeObject | undefined) =>
      p?.status?.conditions?.find((c: any) => c.type === 'Ready')?.status === 'True';
    const onA = () =>
      kube
        .objects('Pod', 'default')
        .filter((p) => p.spec.nodeName === 'gpu-a' && p.metadata.labels?.['app'] === 'llm');
    expect(onA().every(ready)).toBe(true);
    kube.setNodeReady('gpu-a', false);
    expect(onA().some(ready)).toBe(false);
    expect(kube.get('Node', undefined, 'gpu-a')!.spec.taints).toContainEqual({
      key: 'node.kubernetes.io/unreachable',
      effect: 'NoSchedule',
    });
    kube.setNodeReady('gpu-a', true);
    expect(onA().every(ready)).toBe(true);

    // A node deleted: the pod garbage collector removes its pods; their replacements go to the new node.
    kube.addNode({ name: 'gpu-d', allocatable: { 'nvidia.com/gpu': 8 } });
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.deleteNode({ name: 'gpu-a' });
    await kube.waitFor(() => {
      const ps = kube.objects('Pod', 'default').filter((p) => p.metadata.labels?.['app'] === 'llm');
      return ps.length === 2 && ps.every((p) => p.spec.nodeName === 'gpu-d' && ready(p));
    });
  });

  it('patches with server-side apply and merge patch, and refuses a stale update with 409 Conflict', async () => {
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const body = deployment('applied', 0);
    const created = await apps.patchNamespacedDeployment(
      { namespace: 'default', name: 'applied', body, fieldManager: 'llmgw' },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
    );
    expect(created.metadata?.generation).toBe(1);
    const scaled = await apps.patchNamespacedDeployment(
      { namespace: 'default', name: 'applied', body: { spec: { replicas: 0, paused: true } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    expect(scaled.metadata?.generation).toBe(2);
    const stale = { ...created, spec: { ...created.spec!, replicas: 0 } };
    const err = await apps
      .replaceNamespacedDeployment({ namespace: 'default', name: 'applied', body: stale })
      .catch((e: unknown) => e);
    expect((err as any).code).toBe(409);
    expect(status(err).message).toBe(
      'Operation cannot be fulfilled on deployments.apps "applied": the object has been modified; please apply your changes to the latest version and try again',
    );
  });

  it('refuses what the real server refuses, in its words', async () => {
    const post = (path: string, body: unknown, init: RequestInit = {}) =>
      fetch(`${kube.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${kube.token!}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        ...init,
      });
    // Typed client-node APIs drop unknown fields before sending; raw JSON and custom objects keep them.
    const typo = await post(
      '/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict',
      deployment('typo', 1, { imagePullPolcy: 'Always' }),
    );
    expect(typo.status).toBe(400);
    expect(await typo.json()).toMatchObject({
      kind: 'Status',
      reason: 'BadRequest',
      message:
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.template.spec.containers[0].imagePullPolcy"',
    });
    // fieldValidation=Ignore drops the field, as the decoder does.
    const ignored = await post(
      '/apis/apps/v1/namespaces/default/deployments?fieldValidation=Ignore',
      deployment('typo', 0, { imagePullPolcy: 'Always' }),
    );
    expect(ignored.status).toBe(201);
    expect(((await ignored.json()) as any).spec.template.spec.containers[0]).not.toHaveProperty(
      'imagePullPolcy',
    );
    const warned = await post(
      '/apis/apps/v1/namespaces/default/deployments?fieldValidation=Warn',
      deployment('warned', 0, { imagePullPolcy: 'Always' }),
    );
    expect(warned.status).toBe(201);
    expect(warned.headers.get('warning')).toBe(
      '299 - "unknown field \\"spec.template.spec.containers[0].imagePullPolcy\\""',
    );

    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const apply = await apps
      .patchNamespacedDeployment(
        {
          namespace: 'default',
          name: 'typo2',
          body: deployment('typo2', 0, { imagePullPolcy: 'Always' }),
          fieldManager: 'llmgw',
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
      )
      .catch((e: unknown) => e);
    expect(status(apply).message).toBe(
      'failed to create typed patch object (default/typo2; apps/v1, Kind=Deployment): .spec.template.spec.containers[0].imagePullPolcy: field not declared in schema',
    );

    const mismatched = deployment('mismatch', 1);
    mismatched.spec.selector.matchLabels.app = 'other';
    const invalid = await apps
      .createNamespacedDeployment({ namespace: 'default', body: mismatched as any })
      .catch((e: unknown) => e);
    expect((invalid as any).code).toBe(422);
    expect(status(invalid)).toMatchObject({
      reason: 'Invalid',
      message:
        'Deployment.apps "mismatch" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app":"mismatch"}: `selector` does not match template `labels`',
      details: { causes: [{ reason: 'FieldValueInvalid', field: 'spec.template.metadata.labels' }] },
    });

    const moved = await apps
      .patchNamespacedDeployment(
        {
          namespace: 'default',
          name: 'typo',
          body: {
            spec: {
              selector: { matchLabels: { app: 'x' } },
              template: { metadata: { labels: { app: 'x' } } },
            },
          },
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      )
      .catch((e: unknown) => e);
    expect(status(moved).message).toBe(
      'Deployment.apps "typo" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"x"}}: field is immutable',
    );

    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const lwsTypo = await custom
      .createNamespacedCustomObject({
        group: 'leaderworkerset.x-k8s.io',
        version: 'v1',
        namespace: 'default',
        plural: 'leaderworkersets',
        body: {
          apiVersion: 'leaderworkerset.x-k8s.io/v1',
          kind: 'LeaderWorkerSet',
          metadata: { name: 'x' },
          spec: { leaderWorkerTemplate: { size: 2, workerTemplates: {} } },
        },
      })
      .catch((e: unknown) => e);
    expect(lwsTypo.code).toBe(400);
    expect(status(lwsTypo).message).toBe(
      'LeaderWorkerSet in version "v1" cannot be handled as a LeaderWorkerSet: strict decoding error: unknown field "spec.leaderWorkerTemplate.workerTemplates"',
    );

    const noNs = await post('/api/v1/namespaces/nowhere/secrets', { metadata: { name: 's' } });
    expect(noNs.status).toBe(404);
    expect(((await noNs.json()) as any).message).toBe('namespaces "nowhere" not found');

    expect(validateObject({ ...deployment('Bad_Name', 1) })).toEqual([
      expect.objectContaining({
        field: 'metadata.name',
        message: expect.stringContaining('Invalid value: "Bad_Name": a lowercase RFC 1123 label'),
      }),
    ]);
    const res = await fetch(`${kube.url}/api/v1/pods`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({
      kind: 'Status',
      reason: 'Unauthorized',
      code: 401,
      message: 'Unauthorized',
    });
    const gone = await fetch(`${kube.url}/api/v1/pods?watch=true&resourceVersion=1`, {
      headers: { authorization: `Bearer ${kube.token!}` },
    });
    expect(JSON.parse(await gone.text())).toMatchObject({
      type: 'ERROR',
      object: {
        kind: 'Status',
        code: 410,
        reason: 'Expired',
        message: expect.stringMatching(/^too old resource version: 1 \(\d+\)$/),
      },
    });
  });

  it('binds a pod another scheduler owns through pods/binding', async () => {
    kube.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'bind-me', namespace: 'default' },
      spec: {
        schedulerName: 'other',
        tolerations: [{ operator: 'Exists' }],
        containers: [{ name: 'c', image: 'x:1' }],
      },
    });
    const res = await fetch(`${kube.url}/api/v1/namespaces/default/pods/bind-me/binding`, {
      method: 'POST',
      headers: { authorization: `Bearer ${kube.token!}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name: 'bind-me' },
        target: { kind: 'Node', name: 'cpu-c' },
      }),
    });
    expect(res.status).toBe(201);
    await kube.waitFor(() => kube.get('Pod', 'default', 'bind-me')?.status?.phase === 'Running');
  });

  it.each<
    [string, string, string, Record<string, unknown> | string | undefined, string | undefined, number, string]
  >([
    [
      'a patch of no known type',
      'PATCH',
      '/api/v1/namespaces/default/secrets/engine-key',
      '{}',
      'text/plain',
      415,
      'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got text/plain)',
    ],
    [
      'a strategic merge patch of a custom resource',
      'PATCH',
      '/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets/big-model',
      {},
      'application/strategic-merge-patch+json',
      415,
      'strategic merge patch is not supported for custom resources; use merge patch or server-side apply',
    ],
    [
      'an apply without fieldManager',
      'PATCH',
      '/api/v1/namespaces/default/secrets/engine-key',
      'metadata: {name: engine-key}',
      'application/apply-patch+yaml',
      422,
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    ],
    [
      'a label selector that does not parse',
      'GET',
      '/api/v1/pods?labelSelector=app%3D(x',
      undefined,
      undefined,
      400,
      'unable to parse requirement: app=(x',
    ],
    [
      'a field selector the kind lacks',
      'GET',
      '/api/v1/pods?fieldSelector=spec.foo%3Dx',
      undefined,
      undefined,
      400,
      'field label not supported: spec.foo',
    ],
    [
      "a PUT whose name is not the URL's",
      'PUT',
      '/api/v1/namespaces/default/secrets/engine-key',
      { metadata: { name: 'other' } },
      'application/json',
      400,
      'the name of the object (other) does not match the name on the URL (engine-key)',
    ],
    [
      'a path the API does not have',
      'GET',
      '/apis/apps/v1/namespaces/default/widgets',
      undefined,
      undefined,
      404,
      'the server could not find the requested resource',
    ],
    [
      'a POST to an object',
      'POST',
      '/api/v1/namespaces/default/secrets/engine-key',
      {},
      'application/json',
      405,
      'the server does not allow this method on the requested resource',
    ],
    [
      'a second binding',
      'POST',
      '/api/v1/namespaces/default/pods/bind-me/binding',
      { target: { name: 'cpu-c' } },
      'application/json',
      409,
      'Operation cannot be fulfilled on pods/binding "bind-me": pod bind-me is already assigned to node "cpu-c"',
    ],
    [
      'a continue token that is not one',
      'GET',
      '/api/v1/pods?limit=1&continue=%%%',
      undefined,
      undefined,
      400,
      'continue key is not valid: illegal base64 data',
    ],
  ])('refuses %s', async (_what, method, path, body, type, code, message) => {
    const res = await fetch(`${kube.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${kube.token!}`, ...(type ? { 'content-type': type } : {}) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    expect(res.status).toBe(code);
    expect(await res.json()).toMatchObject({ kind: 'Status', status: 'Failure', code, message });
  });
});

export type { KubeObject };
