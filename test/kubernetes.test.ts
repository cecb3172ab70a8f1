import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../src/cli/gateway-compose.js';
import { generateSecret, hashSecret, secretPrefix } from '../src/core/secrets.js';

import { fakeVllm, freePort, startFake, type FakeProcess } from './fakes/engines/fake-engines.js';
import {
  startFakeKubeApiServer,
  type FakeKubeApiServer,
  type KubeObject,
  type KubeletHook,
} from './fakes/kube-apiserver/index.js';
import { dialAgentChannel } from './support/agents.js';
import { llmgw, startDaemon } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { until } from './support/fleet.js';

/**
 * Kubernetes mode end to end: a control plane with `kubernetes:` settings against the fake API
 * server (test/fakes/kube-apiserver), whose kubelet starts the fake vLLM on 127.0.0.N for each
 * pod it runs. The objects llmgw writes, the replicas and nodes it shows, the routes its gateway
 * takes: all as a cluster would have them.
 */

const ns = 'llmgw';
const h100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' };
const a100 = { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB', 'nvidia.com/gpu.memory': '81920' };

describe('Kubernetes mode', () => {
  let kube: FakeKubeApiServer;
  let t: TestControlPlane;
  let port: number;
  const engines = new Map<string, FakeProcess>();
  let nextIp = 2;

  /** The kubelet: the pod's engine container as a fake vLLM on its own loopback address. */
  const kubelet: KubeletHook = (pod) => {
    const c = (pod.spec?.containers as KubeObject[] | undefined)?.[0];
    const env = (c?.['env'] ?? []) as { name: string; value?: string; valueFrom?: any }[];
    const ref = env.find((e) => e.valueFrom?.secretKeyRef !== undefined)?.valueFrom.secretKeyRef;
    const secret = kube.get('Secret', ns, ref.name);
    const key =
      secret?.['data']?.[ref.key] !== undefined
        ? Buffer.from(secret['data'][ref.key], 'base64').toString('utf8')
        : secret?.['stringData']?.[ref.key];
    const ip = `127.0.0.${nextIp++}`;
    const vars: Record<string, string> = { FAKE_VLLM_LOAD_MS: '0' };
    for (const e of env)
      if (e.value !== undefined) vars[e.name] = e.value.replace('$(LLMGW_ENGINE_KEY)', key);
    const args = (c?.['args'] as string[]).map((a) => (a === '0.0.0.0' ? ip : a));
    const engine = startFake(fakeVllm, args, vars);
    engines.set(pod.metadata.name, engine);
    return {
      ip,
      stop: async () => {
        await engine.stop();
      },
    };
  };

  const replicas = async (model: string) =>
    (await api(t.url, t.adminKey, 'GET', `/replicas?model=${model}`)).body.items as any[];
  const chat = (model: string) =>
    fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
  const addModel = async (model: object) => {
    const r = await api(t.url, t.adminKey, 'POST', '/models', model);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  };

  beforeAll(async () => {
    kube = await startFakeKubeApiServer({
      namespaces: ['default', ns],
      nodes: [
        { name: 'gpu-1', labels: h100, allocatable: { 'nvidia.com/gpu': '2' } },
        { name: 'gpu-2', labels: h100, allocatable: { 'nvidia.com/gpu': '2' } },
        {
          name: 'mig-1',
          labels: a100,
          allocatable: { 'nvidia.com/mig-3g.40gb': '1', 'nvidia.com/mig-1g.10gb': '3' },
        },
      ],
      kubelet,
    });
    port = await freePort();
    t = await startControlPlane({
      config: [
        'kubernetes:',
        `  namespace: ${ns}`,
        `  kubeconfig: ${await kube.kubeconfig({ namespace: ns })}`,
        `  engine_port: ${port}`,
        '  models: {pvc: models}',
        '  runtime_class: nvidia',
      ].join('\n'),
    });
    await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
    });
  }, 30_000);
  afterAll(async () => {
    await t.stop();
    await kube.close();
    for (const e of engines.values()) await e.stop().catch(() => undefined);
  });

  it('writes a Deployment with the replicas, requests and affinity of the model, and its key in a Secret', async () => {
    await addModel({
      name: 'chat',
      source: 'hf://org/repo',
      replicas: 2,
      profiles: [{ name: 'h100', engine: 'vllm', gpu_class: 'h100-80g' }],
    });
    const d = await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-chat-h100'), 10_000);
    expect(d.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'llmgw',
      'llmgw.io/model': 'chat',
      'llmgw.io/profile': 'h100',
    });
    expect(d.metadata.annotations?.['llmgw.io/spec-hash']).toMatch(/^[0-9a-f]{16}$/);
    expect(d.spec.replicas).toBe(2);
    const pod = d.spec.template.spec;
    expect(pod.containers[0].resources.requests).toEqual({
      'nvidia.com/gpu': '1',
      cpu: '3',
      memory: '6144Mi',
    });
    expect(pod.runtimeClassName).toBe('nvidia');
    expect(
      pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0],
    ).toEqual({
      matchExpressions: [
        { key: 'nvidia.com/gpu.product', operator: 'In', values: ['NVIDIA-H100-80GB-HBM3'] },
        { key: 'nvidia.com/gpu.memory', operator: 'In', values: ['81559'] },
      ],
    });
    expect(pod.volumes).toContainEqual({
      name: 'models',
      persistentVolumeClaim: { claimName: 'models', readOnly: true },
    });
    expect(kube.get('Secret', ns, 'llmgw-chat-engine-key')).toBeDefined();
  });

  it('routes to the pods once they are ready; a deleted pod’s traffic moves to the other', async () => {
    const ready = await until(
      'both replicas of chat ready',
      async () => {
        const list = await replicas('chat');
        return list.length === 2 && list.every((r) => r.state === 'ready') ? list : undefined;
      },
      20_000,
    );
    expect(ready.map((r) => r.node).sort()).toEqual(['gpu-1', 'gpu-2']);
    expect(ready[0].endpoint).toMatch(new RegExp(`^http://127\\.0\\.0\\.\\d+:${port}$`));
    const table = await t.cp.fleet.routeTable();
    expect(
      table.replicas
        .filter((r) => r.model === 'chat')
        .map((r) => r.id)
        .sort(),
    ).toEqual(ready.map((r) => r.id).sort());
    await until(
      'the gateway answers',
      async () => ((await chat('chat')).status === 200 ? true : undefined),
      5000,
    );

    const [gone, kept] = ready;
    kube.deletePod(ns, gone.id);
    await until(
      'the deleted pod leaves the routes',
      async () => {
        const ids = (await t.cp.fleet.routeTable()).replicas.map((r) => r.id);
        return !ids.includes(gone.id) && ids.includes(kept.id) ? true : undefined;
      },
      10_000,
    );
    // The gateway reads its routes twice a second.
    await new Promise((r) => setTimeout(r, 800));
    // Every request lands on the one left, while the Deployment makes another pod.
    for (let i = 0; i < 4; i++) {
      const r = await chat('chat');
      expect(r.status).toBe(200);
      await r.text();
    }
    const served = (await t.cp.fleet.routeTable()).replicas.filter((r) => r.model === 'chat');
    expect(served.map((r) => r.id)).toContain(kept.id);
  }, 40_000);

  it('scales the Deployment with the model', async () => {
    const r = await api(t.url, t.adminKey, 'POST', '/models/chat/scale', { replicas: 3 });
    expect(r.status).toBe(200);
    await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-chat-h100')?.spec.replicas === 3, 10_000);
  });

  it('shows a pending pod’s scheduler message as the replica’s reason, and requests a MIG class by its resource', async () => {
    // Two replicas of a class one node has one of: the second waits, in the scheduler's words.
    await addModel({
      name: 'mig',
      source: 'hf://org/repo',
      replicas: 2,
      profiles: [{ name: 'mig', engine: 'vllm', gpu_class: 'a100-80g-mig-3g.40gb' }],
    });
    const d = await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-mig-mig'), 10_000);
    expect(d.spec.template.spec.containers[0].resources.requests).toEqual({
      'nvidia.com/mig-3g.40gb': '1',
      cpu: '3',
      memory: '6144Mi',
    });
    const pending = await until(
      'a pending replica of mig with a reason',
      async () => (await replicas('mig')).find((r) => r.state === 'pending' && r.id !== null),
      15_000,
    );
    expect(pending.reason).toMatch(/^0\/3 nodes are available: .*1 Insufficient nvidia\.com\/mig-3g\.40gb/);
    const r = await llmgw(['ctl', 'replicas', 'mig'], { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey });
    // The table cuts long reasons: its start is the scheduler's.
    expect(r.stdout).toMatch(/pending .* 0\/3 nodes are available: 1 Insufficient nvidia\.com\/mig-3g/);
  }, 30_000);

  it('runs a multi-node profile as a LeaderWorkerSet of its nodes', async () => {
    await addModel({
      name: 'big',
      source: 'hf://org/repo',
      replicas: 1,
      profiles: [
        { name: 'two', engine: 'vllm', gpu_class: 'h100-80g', gpus_per_node: 1, tp: 1, pp: 2, nodes: 2 },
      ],
    });
    const lws = await kube.waitFor(() => kube.get('LeaderWorkerSet', ns, 'llmgw-big-two'), 10_000);
    expect(lws.apiVersion).toBe('leaderworkerset.x-k8s.io/v1');
    expect(lws.spec.leaderWorkerTemplate.size).toBe(2);
    expect(lws.spec.replicas).toBe(1);
    // Its group is one replica, named for its leader's pod, each pod a shard.
    const group = await until(
      'the group of big as one replica',
      async () => (await replicas('big')).find((r) => r.id !== null && r.shards.length === 2),
      10_000,
    );
    expect(group.id).toBe('llmgw-big-two-0');
    expect(group.shards.map((s: { rank: number }) => s.rank)).toEqual([0, 1]);
  });

  it('replaces the Deployment by a LeaderWorkerSet when the profile comes to span nodes', async () => {
    const grow = (nodes: number) => ({
      name: 'grow',
      source: 'hf://org/repo',
      replicas: 0,
      profiles: [{ name: 'p', engine: 'vllm', gpu_class: 'h100-80g', gpus_per_node: 1, pp: nodes, nodes }],
    });
    await addModel(grow(1));
    await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-grow-p'), 10_000);
    const r = await api(t.url, t.adminKey, 'PUT', '/models/grow', grow(2));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await kube.waitFor(() => kube.get('LeaderWorkerSet', ns, 'llmgw-grow-p'), 10_000);
    await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-grow-p') === undefined, 10_000);
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/grow')).status).toBe(200);
  });

  it('shows the Kubernetes nodes in ctl nodes, with their classes', async () => {
    const r = await llmgw(['ctl', 'nodes'], { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/gpu-1\s.*h100-80g/);
    expect(r.stdout).toMatch(/mig-1\s.*a100-80g-mig-3g\.40gb/);
    // The planner sees the cluster's classes as it sees agents' nodes.
    const plan = await llmgw(['ctl', 'plan', 'chat'], { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey });
    expect(plan.stderr).toBe('');
    expect(plan.stdout).toMatch(/h100\s+vllm\s+h100-80g\s+1\s+yes/);
    const status = await api(t.url, t.adminKey, 'GET', '/status');
    expect(status.body.nodes).toMatchObject({ total: 3, ready: 3 });
    expect(status.body.devices).toContainEqual(expect.objectContaining({ class: 'h100-80g', total: 4 }));
  });

  it('refuses what only agents do, in words', async () => {
    const pull = await api(t.url, t.adminKey, 'POST', '/models/chat/pull', {});
    expect(pull.body.error?.message ?? pull.body.message).toBe(
      'ctl model pull is for nodes with an llmgw agent, and this control plane runs in Kubernetes mode (kubernetes: in its settings): the kubelet runs the engines, and model files come from kubernetes.models.pvc or its downloader init container',
    );
    const rm = await api(t.url, t.adminKey, 'DELETE', '/nodes/gpu-1');
    expect(rm.status).toBe(400);
    expect(JSON.stringify(rm.body)).toContain(
      'node gpu-1 is a Kubernetes node, which llmgw reads from the cluster: remove it there (kubectl drain gpu-1, then kubectl delete node gpu-1)',
    );
  });

  it('takes no agents: refuses a join token and an agent that dials, joining nothing', async () => {
    const said =
      'this control plane runs engines as Kubernetes pods (the kubernetes section of its settings) and takes no agents: ' +
      "the cluster's GPU nodes serve through the pods it schedules there; stop this agent, or remove the kubernetes " +
      'section and restart the control plane to run engines on agents';
    const token = await api(t.url, t.adminKey, 'POST', '/node-tokens', { name: 'rack-1' });
    expect(token.status).toBe(412);
    expect(token.body.error.message).toBe(said);
    expect((await t.cp.store.joinTokens.list({ includeRevoked: true })).map((k) => k.name)).not.toContain(
      'rack-1',
    );

    // A token made before the control plane came to run on Kubernetes.
    const secret = generateSecret('join');
    await t.cp.store.joinTokens.create(
      { name: 'older', prefix: secretPrefix(secret), secretHash: hashSecret(secret), expiresAt: null },
      'test',
    );
    const answer = await dialAgentChannel(t.url, {
      authorization: `Bearer ${secret}`,
      'x-llmgw-node-id': 'a1b2c3d4-e5f6-4a1b-8c9d-0e1f2a3b4c5d',
      'x-llmgw-node-name': 'gpu-9',
    });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body).error.message).toBe(said);
    expect(await t.cp.store.nodes.getByName('gpu-9')).toBeUndefined();
    expect(
      (await t.cp.store.joinTokens.list({ includeRevoked: true })).find((k) => k.name === 'older'),
    ).toMatchObject({ uses: 0 });
  });

  it('llmgw up in Kubernetes mode runs no agent on its machine: the nodes are the cluster’s', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-kube-up-'));
    try {
      const config = join(dir, 'config.yaml');
      writeFileSync(
        config,
        [
          'kubernetes:',
          `  namespace: ${ns}`,
          `  kubeconfig: ${await kube.kubeconfig({ namespace: ns })}`,
        ].join('\n'),
      );
      const env = {
        XDG_CONFIG_HOME: join(dir, 'xdg'),
        LLMGW_LISTEN: '127.0.0.1:0',
        LLMGW_CONFIG: config,
        LLMGW_DATA_DIR: join(dir, 'data'),
      };
      const up = startDaemon(['up'], env, dir);
      try {
        await up.waitFor(
          /"msg":"kubernetes mode: engines run as pods of the cluster, so no agent runs on this machine"/,
        );
        const url = (await up.waitFor(/"url":"(http:\/\/[\d.:]+)"/))[1]!;
        const nodes = await llmgw(['ctl', 'nodes', '--server', url, '--json'], env);
        expect(nodes.code, nodes.stderr).toBe(0);
        expect((JSON.parse(nodes.stdout).items as { name: string }[]).map((n) => n.name).sort()).toEqual([
          'gpu-1',
          'gpu-2',
          'mig-1',
        ]);
        expect(up.output()).not.toContain('"msg":"node joined"');
      } finally {
        expect(await up.stop('SIGTERM')).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('restarts a replica: in place by deleting its pod, else as kubectl rollout restart does', async () => {
    const [first] = await until('a ready replica of chat', async () => {
      const ready = (await replicas('chat')).filter((r) => r.state === 'ready');
      return ready.length > 0 ? ready : undefined;
    });
    const inPlace = await api(t.url, t.adminKey, 'POST', `/replicas/${first.id}/restart`, { in_place: true });
    expect(inPlace.status, JSON.stringify(inPlace.body)).toBe(200);
    expect(inPlace.body.message).toBe(
      `pod ${first.id} deleted by admin: its Deployment makes a new one in its place`,
    );
    await kube.waitFor(() => kube.get('Pod', ns, first.id) === undefined, 10_000);

    const [second] = await until('a ready replica of chat', async () => {
      const ready = (await replicas('chat')).filter((r) => r.state === 'ready');
      return ready.length > 0 ? ready : undefined;
    });
    const rolled = await api(t.url, t.adminKey, 'POST', `/replicas/${second.id}/restart`, {});
    expect(rolled.status, JSON.stringify(rolled.body)).toBe(200);
    expect(rolled.body.mode).toBe('surge');
    const d = kube.get('Deployment', ns, 'llmgw-chat-h100');
    expect(d?.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt']).toMatch(/^\d{4}-/);
  }, 30_000);

  it('keeps watching after the API server ends its watches and forgets old versions', async () => {
    kube.compact();
    kube.dropWatches();
    const r = await api(t.url, t.adminKey, 'POST', '/models/chat/scale', { replicas: 1 });
    expect(r.status).toBe(200);
    // The pods' informer lists again (410 Gone) and sees the Deployment's pods go.
    await until(
      'chat down to one replica',
      async () =>
        (await replicas('chat')).filter((x) => x.retiring !== true).length === 1 ? true : undefined,
      15_000,
    );
    expect(kube.watchStats.gone).toBeGreaterThan(0);
  }, 20_000);

  it('deletes the objects of a model removed from the catalog', async () => {
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/mig')).status).toBe(200);
    await kube.waitFor(() => kube.get('Deployment', ns, 'llmgw-mig-mig') === undefined, 15_000);
    await kube.waitFor(() => kube.get('Secret', ns, 'llmgw-mig-engine-key') === undefined, 5000);
  });
});

describe('Kubernetes mode refused at start', () => {
  let kube: FakeKubeApiServer;
  beforeAll(async () => {
    kube = await startFakeKubeApiServer({ namespaces: ['default', ns] });
  });
  afterAll(async () => {
    await kube.close();
  });
  const start = (lines: string[]) => startControlPlane({ config: ['kubernetes:', ...lines].join('\n') });

  it('says so when the credentials are not accepted', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'llmgw-kube-')), 'kubeconfig');
    writeFileSync(path, kube.kubeconfigYaml().replace(`token: ${kube.token ?? ''}`, 'token: wrong'));
    await expect(start([`  kubeconfig: ${path}`])).rejects.toThrow(
      'could not list nodes: the Kubernetes API says: Unauthorized (401); the credentials of kubernetes.kubeconfig (or the service account token) are not accepted: renew them',
    );
    rmSync(join(path, '..'), { recursive: true, force: true });
  });

  it('names the contexts a kubeconfig has when the one asked for is not there', async () => {
    const path = await kube.kubeconfig();
    await expect(start([`  kubeconfig: ${path}`, '  context: prod'])).rejects.toThrow(
      `kubernetes.context "prod" is not a context of ${path} (it has: fake)`,
    );
  });
});
