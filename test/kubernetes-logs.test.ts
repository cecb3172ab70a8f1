import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  startFakeKubeApiServer,
  type FakeKubeApiServer,
  type KubeletHook,
} from './fakes/kube-apiserver/index.js';
import { llmgw, startDaemon } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { until } from './support/fleet.js';

/**
 * `ctl logs` in Kubernetes mode: the engine container's log of the replica's pod, read through
 * the API (test/fakes/kube-apiserver, whose kubelet serves each pod's log from `logs` here).
 */

const ns = 'llmgw';
const h100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' };

describe('Kubernetes mode: ctl logs', () => {
  let kube: FakeKubeApiServer;
  let t: TestControlPlane;
  let env: Record<string, string>;
  /** Each pod's engine log, by pod name. */
  const logs = new Map<string, string>();
  /** Models whose pods' containers stay in creation (the kubelet's hook has not returned). */
  const creating = new Map<string, () => void>();
  let nextIp = 2;

  const kubelet: KubeletHook = async (pod) => {
    const name = pod.metadata.name;
    if (pod.metadata.labels?.['llmgw.io/model'] === 'slow')
      await new Promise<void>((r) => creating.set(name, r));
    logs.set(name, Array.from({ length: 5 }, (_, i) => `${name} line ${i + 1}\n`).join(''));
    return {
      ip: `127.0.0.${nextIp++}`,
      ready: true,
      logs: (container) => (container === 'engine' ? (logs.get(name) ?? '') : ''),
    };
  };

  const replicas = async (model: string) =>
    (await api(t.url, t.adminKey, 'GET', `/replicas?model=${model}`)).body.items as any[];
  const addModel = async (model: object) => {
    const r = await api(t.url, t.adminKey, 'POST', '/models', model);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  };
  const ready = (model: string, shards = 1) =>
    until(
      `a ready replica of ${model}`,
      async () =>
        (await replicas(model)).find(
          (r) => r.state === 'ready' && r.id !== null && r.shards.length === shards,
        ),
      15_000,
    );

  beforeAll(async () => {
    kube = await startFakeKubeApiServer({
      namespaces: ['default', ns],
      nodes: ['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4'].map((name) => ({
        name,
        labels: h100,
        allocatable: { 'nvidia.com/gpu': '1' },
      })),
      kubelet,
    });
    t = await startControlPlane({
      config: [
        'kubernetes:',
        `  namespace: ${ns}`,
        `  kubeconfig: ${await kube.kubeconfig({ namespace: ns })}`,
        '  models: {pvc: models}',
      ].join('\n'),
    });
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
  }, 30_000);
  afterAll(async () => {
    for (const r of creating.values()) r();
    await t.stop();
    await kube.close();
  });

  it("prints the last lines of a ready pod's engine container, through ctl logs and the API", async () => {
    await addModel({
      name: 'chat',
      source: 'hf://org/repo',
      profiles: [{ name: 'h100', engine: 'vllm', gpu_class: 'h100-80g' }],
    });
    const { id } = await ready('chat');
    const r = await llmgw(['ctl', 'logs', id, '--tail', '2'], env);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${id} line 4\n${id} line 5\n`);
    const res = await fetch(`${t.url}/api/v1/replicas/${id}/logs?tail=1`, {
      headers: { authorization: `Bearer ${t.adminKey}` },
    });
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await res.text()).toBe(`${id} line 5\n`);
  });

  it("names pods/log and the chart's Role when RBAC denies the log", async () => {
    const { id } = await ready('chat');
    kube.forbid('get', 'pods/log');
    try {
      const r = await llmgw(['ctl', 'logs', id], env);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(
        `could not get pods/log ${id} in namespace ${ns}: the Kubernetes API says: pods "${id}" is forbidden: User "fake" cannot get resource "pods/log" in API group "" in the namespace "${ns}" (403); llmgw's service account may not get pods/log in ${ns}: grant it in the Role (or ClusterRole, for nodes) the Helm chart installs (deploy/helm/llmgw, templates/rbac.yaml)`,
      );
      // Following asks the same endpoint, streamed: the same words.
      const f = await api(t.url, t.adminKey, 'GET', `/replicas/${id}/logs?follow=true`);
      expect(f.status).toBe(503);
      expect(JSON.stringify(f.body)).toContain(
        `is forbidden: User \\"fake\\" cannot get resource \\"pods/log\\"`,
      );
    } finally {
      kube.allow('get', 'pods/log');
    }
  });

  it('follows the log with -f until interrupted', async () => {
    const { id } = await ready('chat');
    const d = startDaemon(['ctl', 'logs', id, '-f', '--tail', '1'], env);
    try {
      await d.waitFor(new RegExp(`${id} line 5\\n`), 10_000);
      logs.set(id, `${logs.get(id) ?? ''}a new line, then `);
      await new Promise((r) => setTimeout(r, 100));
      logs.set(id, `${logs.get(id) ?? ''}its end\n`);
      await d.waitFor(/a new line, then its end\n/, 10_000);
      expect(d.output()).toBe(`${id} line 5\na new line, then its end\n`);
    } finally {
      await d.stop('SIGINT');
    }
  });

  it("reads a multi-node replica's shard by its rank", async () => {
    await addModel({
      name: 'big',
      source: 'hf://org/repo',
      profiles: [
        { name: 'two', engine: 'vllm', gpu_class: 'h100-80g', gpus_per_node: 1, tp: 1, pp: 2, nodes: 2 },
      ],
    });
    const group = await ready('big', 2);
    const r = await llmgw(['ctl', 'logs', group.id, '--rank', '1', '--tail', '1'], env);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${group.id}-1 line 5\n`);
    const none = await llmgw(['ctl', 'logs', group.id, '--rank', '2'], env);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain(`replica ${group.id} has no rank 2 (its pods are ranks 0 to 1)`);
  });

  it("refuses a pending pod's log with the scheduler's reason, and a container not started with the API's", async () => {
    await addModel({
      name: 'wide',
      source: 'hf://org/repo',
      profiles: [{ name: 'h100', engine: 'vllm', gpu_class: 'h100-80g', tp: 4 }],
    });
    const pending = await until(
      'a pending replica of wide',
      async () => (await replicas('wide')).find((r) => r.state === 'pending' && r.id !== null),
      15_000,
    );
    const r = await llmgw(['ctl', 'logs', pending.id], env);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      new RegExp(
        `replica ${pending.id}'s pod ${pending.id} is Pending: 0/4 nodes are available: .*Insufficient nvidia\\.com/gpu`,
      ),
    );

    // The last free GPU: scheduled, its container being created.
    await addModel({
      name: 'slow',
      source: 'hf://org/repo',
      profiles: [{ name: 'h100', engine: 'vllm', gpu_class: 'h100-80g' }],
    });
    const pod = await kube.waitFor(() => [...creating.keys()][0], 15_000);
    const res = await api(t.url, t.adminKey, 'GET', `/replicas/${pod}/logs`);
    expect(res.status).toBe(409);
    expect(JSON.stringify(res.body)).toContain(
      `pod ${pod} has no log to show: the Kubernetes API says: container \\"engine\\" in pod \\"${pod}\\" is waiting to start: ContainerCreating`,
    );
  }, 30_000);
});
