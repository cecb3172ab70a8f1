import { expect } from 'vitest';

import { fleetContract } from '../src/server/fleets/fleet.contract.js';

import { startFakeKubeApiServer, type KubeletHook } from './fakes/kube-apiserver/index.js';
import { api, startControlPlane } from './support/control-plane.js';

// The Kubernetes fleet against the fake API server, whose kubelet makes each pod ready on an
// address of its own and serves its engine log; no engine runs (the contract sends no request).
const ns = 'llmgw';
const h100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' };

fleetContract('Kubernetes', {
  async start() {
    let nextIp = 2;
    const kubelet: KubeletHook = (pod) => ({
      ip: `127.0.0.${nextIp++}`,
      ready: true,
      logs: (container) => (container === 'engine' ? `${pod.metadata.name}: model loaded\n` : ''),
    });
    const kube = await startFakeKubeApiServer({
      namespaces: ['default', ns],
      nodes: ['gpu-1', 'gpu-2'].map((name) => ({
        name,
        labels: h100,
        allocatable: { 'nvidia.com/gpu': '2' },
      })),
      kubelet,
    });
    const t = await startControlPlane({
      config: [
        'kubernetes:',
        `  namespace: ${ns}`,
        `  kubeconfig: ${await kube.kubeconfig({ namespace: ns })}`,
        '  models: {pvc: models}',
      ].join('\n'),
    });
    return {
      fleet: t.cp.fleet,
      addModel: async (name, replicas) => {
        const r = await api(t.url, t.adminKey, 'POST', '/models', {
          name,
          source: 'hf://org/repo',
          replicas,
          profiles: [{ name: 'h100', engine: 'vllm', gpu_class: 'h100-80g' }],
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
      },
      removeModel: async (name) => {
        const r = await api(t.url, t.adminKey, 'DELETE', `/models/${name}`);
        expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
      },
      stop: async () => {
        await t.stop();
        await kube.close();
      },
    };
  },
  unknownReplica:
    'no replica is named "nope-1" (llmgw ctl replicas lists them; in Kubernetes a replica is its pod)',
  logLine: /model loaded/,
  pullRefused: {
    code: 'not_implemented',
    message:
      'ctl model pull is for nodes with an llmgw agent, and this control plane runs in Kubernetes mode (kubernetes: in its settings): the kubelet runs the engines, and model files come from kubernetes.models.pvc or its downloader init container',
  },
  caches: {
    refused: {
      code: 'not_implemented',
      message:
        "ctl cache of nodes' model files is for nodes with an llmgw agent, and this control plane runs in Kubernetes mode (kubernetes: in its settings): the kubelet runs the engines, and model files come from kubernetes.models.pvc or its downloader init container",
    },
  },
});
