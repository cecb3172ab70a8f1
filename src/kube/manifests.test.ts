import { describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import type { Origin } from '../models/origin.js';

import type { KDeployment, KPodSpec } from './kube-types.js';
import {
  affinityOf,
  affinityProducts,
  engineKeySecret,
  keepingPlacedPods,
  productsByClass,
  workloadOf,
  type LeaderWorkerSet,
  type PodSettings,
  templatesOf,
  type WorkloadInput,
} from './manifests.js';
import { standardProblems } from './pod-standards.js';

const profile = (p: Partial<ProfileSpec>): ProfileSpec => ({
  name: 'h100',
  engine: 'vllm',
  gpu_class: 'h100-80g',
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  nodes: 1,
  args: [],
  env: {},
  adapters: [],
  ...p,
});
const model = (p: ProfileSpec): ModelSpec => ({
  name: 'qwen',
  source: 'hf:Qwen/Qwen3-8B',
  replicas: 2,
  profiles: [p],
});
const origin: Origin = {
  source: 'hf:Qwen/Qwen3-8B',
  kind: 'hf',
  repo: 'Qwen/Qwen3-8B',
  revision: 'main',
  commit: 'a'.repeat(40),
  files: [{ path: 'config.json', size: 10 }],
};
const settings: PodSettings = {
  namespace: 'llmgw',
  models: { pvc: 'models', mount_path: '/models', downloader_image: '' },
  runtime_class: 'nvidia',
  engine_port: 8000,
  service_account: '',
};
const products = productsByClass([
  { labels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' } },
  { labels: { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB', 'nvidia.com/gpu.memory': '81920' } },
]);
const input = (p: ProfileSpec, o: Partial<WorkloadInput> = {}): WorkloadInput => ({
  model: model(p),
  profile: p,
  origin,
  replicas: 2,
  settings,
  llamaParallel: 4,
  products,
  ...o,
});

describe('workloadOf: a Deployment', () => {
  const d = workloadOf(input(profile({ gpus_per_node: 2, tp: 2 }))) as KDeployment;
  const pod = d.spec?.template.spec;
  const engine = pod?.containers[0];

  it('is named and labelled per the shared decision, with the count wanted', () => {
    expect(d.kind).toBe('Deployment');
    expect(d.metadata?.name).toBe('llmgw-qwen-h100');
    expect(d.metadata?.labels).toEqual({
      'app.kubernetes.io/managed-by': 'llmgw',
      'llmgw.io/model': 'qwen',
      'llmgw.io/profile': 'h100',
    });
    expect(d.metadata?.annotations?.['llmgw.io/spec-hash']).toMatch(/^[0-9a-f]{16}$/);
    expect(d.spec?.replicas).toBe(2);
    expect(d.spec?.selector.matchLabels).toEqual(d.metadata?.labels);
  });

  it('requests the cards, host CPUs and memory, and pins the class by GFD labels', () => {
    // 2 + 1 CPU and 2 + 4 GiB per card: gpuPodCpus, gpuPodMemoryMib.
    expect(engine?.resources?.requests).toEqual({ 'nvidia.com/gpu': '2', cpu: '4', memory: '10240Mi' });
    expect(engine?.resources?.limits).toEqual({ 'nvidia.com/gpu': '2' });
    expect(
      pod?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms,
    ).toEqual([
      {
        matchExpressions: [
          { key: 'nvidia.com/gpu.product', operator: 'In', values: ['NVIDIA-H100-80GB-HBM3'] },
          { key: 'nvidia.com/gpu.memory', operator: 'In', values: ['81559'] },
        ],
      },
      { matchExpressions: [{ key: 'llmgw.io/gpu-class', operator: 'In', values: ['h100-80g'] }] },
    ]);
    expect(pod?.runtimeClassName).toBe('nvidia');
  });

  it('runs the engine module’s command, its key from the Secret', () => {
    expect(engine?.image).toBe('vllm/vllm-openai:v0.21.0');
    expect(engine?.command).toEqual(['vllm']);
    expect(engine?.args?.slice(0, 6)).toEqual([
      'serve',
      `/models/models--Qwen--Qwen3-8B/snapshots/${'a'.repeat(40)}`,
      '--host',
      '0.0.0.0',
      '--port',
      '8000',
    ]);
    expect(engine?.args).toContain('--tensor-parallel-size');
    expect(engine?.env).toEqual([
      {
        name: 'LLMGW_ENGINE_KEY',
        valueFrom: { secretKeyRef: { name: 'llmgw-qwen-engine-key', key: 'engine-key' } },
      },
      { name: 'VLLM_API_KEY', value: '$(LLMGW_ENGINE_KEY)' },
    ]);
    expect(engine?.readinessProbe?.httpGet).toEqual({ path: '/health', port: 'http' });
  });

  it('mounts the PVC read-only and /dev/shm in memory, 2 GiB a card', () => {
    expect(pod?.volumes).toEqual([
      { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '4096Mi' } },
      { name: 'models', persistentVolumeClaim: { claimName: 'models', readOnly: true } },
    ]);
    expect(engine?.volumeMounts).toEqual([
      { name: 'shm', mountPath: '/dev/shm' },
      { name: 'models', mountPath: '/models', readOnly: true },
    ]);
  });

  it('changes its hash with what runs, not with the count', () => {
    const hash = (i: WorkloadInput) => workloadOf(i).metadata?.annotations?.['llmgw.io/spec-hash'];
    const p = profile({});
    expect(hash(input(p, { replicas: 5 }))).toBe(hash(input(p)));
    expect(hash(input(profile({ args: ['--max-num-seqs', '8'] })))).not.toBe(hash(input(p)));
  });
});

describe('workloadOf: MIG, CPU, llama.cpp, downloads', () => {
  it('requests one MIG device of the class by its resource name', () => {
    const d = workloadOf(input(profile({ gpu_class: 'a100-80g-mig-3g.40gb', name: 'mig' }))) as KDeployment;
    const c = d.spec?.template.spec?.containers[0];
    expect(c?.resources?.requests).toEqual({ 'nvidia.com/mig-3g.40gb': '1', cpu: '3', memory: '6144Mi' });
    expect(
      d.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ?.nodeSelectorTerms[0]?.matchExpressions?.[0]?.values,
    ).toEqual(['NVIDIA-A100-SXM4-80GB']);
  });

  it('gives a CPU profile no GPU and no affinity, and the threads it requests', () => {
    const p = profile({ engine: 'llamacpp', cpu: true, gpus_per_node: 0, name: 'cpu' });
    delete p.gpu_class;
    const gguf: Origin = { ...origin, files: [{ path: 'q4.gguf', size: 3 * 2 ** 30 }] };
    const d = workloadOf(input(p, { origin: gguf })) as KDeployment;
    const c = d.spec?.template.spec?.containers[0];
    // The weights it maps, and 1 GiB more; no limit, as its KV cache is not counted here.
    expect(c?.resources).toEqual({ requests: { cpu: '4', memory: '4096Mi' } });
    const args = c?.args ?? [];
    expect(args[args.indexOf('--threads') + 1]).toBe('4');
    expect(d.spec?.template.spec?.affinity).toBeUndefined();
    expect(c?.image).toBe('ghcr.io/ggml-org/llama.cpp:server-b10587');
    expect(c?.command).toEqual(['/app/llama-server']);
    expect(c?.args).toContain(`/models/models--Qwen--Qwen3-8B/snapshots/${'a'.repeat(40)}/q4.gguf`);
    expect(c?.env).toContainEqual({ name: 'LLAMA_API_KEY', value: '$(LLMGW_ENGINE_KEY)' });
    expect(c?.env?.some((e) => e.name === 'CUDA_VISIBLE_DEVICES')).toBe(false);
  });

  it('passes a key SGLang takes on its command line through the environment variable', () => {
    const d = workloadOf(input(profile({ engine: 'sglang', name: 'sg' }))) as KDeployment;
    const c = d.spec?.template.spec?.containers[0];
    expect(c?.command).toEqual(['python3']);
    const args = c?.args ?? [];
    expect(args[args.indexOf('--api-key') + 1]).toBe('$(LLMGW_ENGINE_KEY)');
    expect(JSON.stringify(d)).not.toContain('llmgw-engine-key\\u0000');
  });

  it('downloads into an emptyDir with the downloader image when no PVC is given', () => {
    const s = {
      ...settings,
      models: { pvc: '', mount_path: '/models', downloader_image: 'ghcr.io/x/llmgw:1' },
    };
    const d = workloadOf(input(profile({}), { settings: s })) as KDeployment;
    expect(d.spec?.template.spec?.volumes).toContainEqual({ name: 'models', emptyDir: {} });
    const init = d.spec?.template.spec?.initContainers?.[0];
    expect(init).toMatchObject({
      name: 'download',
      image: 'ghcr.io/x/llmgw:1',
      volumeMounts: [{ name: 'models', mountPath: '/models' }],
    });
    // llmgw's own downloader, given the pinned origin: the very files the engine's arguments name.
    expect(init?.command).toEqual(['llmgw']);
    expect(init?.args).toEqual([
      'fetch',
      'hf:Qwen/Qwen3-8B',
      '--into',
      '/models',
      '--revision',
      'a'.repeat(40),
      '--origin',
      JSON.stringify(origin),
    ]);
    expect(init?.env).toBeUndefined();
    // The same origin read with its keys in another order makes the same pods (no rollout).
    const reordered = JSON.parse(JSON.stringify(origin, Object.keys(origin).reverse())) as Origin;
    reordered.files = origin.files.map((f) => ({ size: f.size, path: f.path }));
    const again = workloadOf(input(profile({}), { settings: s, origin: reordered })) as KDeployment;
    expect(again.metadata?.annotations).toEqual(d.metadata?.annotations);
  });

  it('gives the downloader the hub mirror and an optional token Secret when configured', () => {
    const s = {
      ...settings,
      models: { pvc: '', mount_path: '/m', downloader_image: 'ghcr.io/x/llmgw:1' },
    };
    const hub = { endpoint: 'https://hf-mirror.example', tokenSecret: { name: 'hub', key: 'token' } };
    const d = workloadOf(input(profile({}), { settings: s, hub })) as KDeployment;
    const init = d.spec?.template.spec?.initContainers?.[0];
    expect(init?.env).toEqual([
      { name: 'HF_ENDPOINT', value: 'https://hf-mirror.example' },
      { name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hub', key: 'token', optional: true } } },
    ]);
    expect(init?.args?.slice(2, 4)).toEqual(['--into', '/m']);
    // The downloader only: the engine reads the fetched files, and never sees the token's Secret.
    const engine = d.spec?.template.spec?.containers[0];
    expect(engine?.env?.length).toBeGreaterThan(0);
    expect(engine?.env?.map((e) => e.name)).not.toContain('HF_TOKEN');
    expect(JSON.stringify(engine?.env)).not.toContain('"hub"');
  });

  it('refuses a model whose files have nowhere to come from', () => {
    const s = { ...settings, models: { pvc: '', mount_path: '/models', downloader_image: '' } };
    expect(() => workloadOf(input(profile({}), { settings: s }))).toThrow(
      "qwen's files have nowhere to come from in Kubernetes: set kubernetes.models.pvc to a PersistentVolumeClaim holding them, or kubernetes.models.downloader_image to an llmgw image that downloads them into each pod",
    );
  });

  it('refuses a source not resolved yet', () => {
    expect(() => workloadOf(input(profile({}), { origin: undefined }))).toThrow(
      'the source hf:Qwen/Qwen3-8B is not resolved yet: its pods are made once it is (llmgw ctl models shows why it is not)',
    );
  });
});

describe('workloadOf: a multi-node profile', () => {
  const lws = workloadOf(
    input(profile({ nodes: 2, gpus_per_node: 8, tp: 8, pp: 2, name: 'big' })),
  ) as LeaderWorkerSet;

  it('is a LeaderWorkerSet of the profile’s nodes', () => {
    expect(lws.apiVersion).toBe('leaderworkerset.x-k8s.io/v1');
    expect(lws.kind).toBe('LeaderWorkerSet');
    expect(lws.spec.replicas).toBe(2);
    expect(lws.spec.leaderWorkerTemplate.size).toBe(2);
  });

  it('tells each rank the leader’s address and its own index', () => {
    const leader = lws.spec.leaderWorkerTemplate.leaderTemplate.spec?.containers[0];
    const worker = lws.spec.leaderWorkerTemplate.workerTemplate.spec?.containers[0];
    const after = (args: string[] | undefined, flag: string) => args?.[args.indexOf(flag) + 1];
    expect(after(leader?.args, '--node-rank')).toBe('0');
    expect(after(worker?.args, '--node-rank')).toBe('$(LWS_WORKER_INDEX)');
    expect(after(worker?.args, '--master-addr')).toBe('$(LWS_LEADER_ADDRESS)');
    expect(worker?.args).toContain('--headless');
    expect(worker?.readinessProbe).toBeUndefined();
    expect(leader?.resources?.requests).toEqual({ 'nvidia.com/gpu': '8', cpu: '10', memory: '34816Mi' });
    expect(worker?.resources).toEqual(leader?.resources);
  });
});

describe('affinityOf', () => {
  it('matches only hand-labelled nodes when no node of the class is known', () => {
    expect(
      affinityOf('l4-24g', products).nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
    ).toEqual({
      nodeSelectorTerms: [
        { matchExpressions: [{ key: 'llmgw.io/gpu-class', operator: 'In', values: ['l4-24g'] }] },
      ],
    });
  });
});

describe('keepingPlacedPods', () => {
  const pcie = { 'nvidia.com/gpu.product': 'NVIDIA-H100-PCIe', 'nvidia.com/gpu.memory': '81559' };
  const h100 = { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3', 'nvidia.com/gpu.memory': '81559' };
  const withPcie = productsByClass([{ labels: h100 }, { labels: pcie }]);
  const p = profile({});
  const written = workloadOf(input(p));
  const products = (w: ReturnType<typeof workloadOf>) => affinityProducts(w)?.map((x) => x.product);
  const hash = (w: ReturnType<typeof workloadOf>) => w.metadata?.annotations?.['llmgw.io/spec-hash'];

  it.each([
    // [what, profile, products seen now, a pod waiting, the products written]
    [
      'a new card model of the class, every pod placed: as written',
      p,
      withPcie,
      false,
      ['NVIDIA-H100-80GB-HBM3'],
    ],
    [
      'a pod waiting for a node: the new one is taken in',
      p,
      withPcie,
      true,
      ['NVIDIA-H100-80GB-HBM3', 'NVIDIA-H100-PCIe'],
    ],
    [
      'something else changed too: written anew, new card model included',
      profile({ args: ['--max-num-seqs', '8'] }),
      withPcie,
      false,
      ['NVIDIA-H100-80GB-HBM3', 'NVIDIA-H100-PCIe'],
    ],
    [
      'a card model gone, every pod placed: as written',
      p,
      productsByClass([{ labels: pcie }]),
      false,
      ['NVIDIA-H100-80GB-HBM3'],
    ],
  ] as const)('%s', (_what, prof, seen, waiting, expected) => {
    const out = keepingPlacedPods(input(prof, { products: seen }), written, waiting);
    expect(products(out)).toEqual(expected);
    if (prof === p && !waiting) expect(hash(out)).toBe(hash(written));
  });

  it('writes what the cluster has for a workload not written yet', () => {
    expect(products(keepingPlacedPods(input(p, { products: withPcie }), undefined, false))).toEqual([
      'NVIDIA-H100-80GB-HBM3',
      'NVIDIA-H100-PCIe',
    ]);
  });

  it('reads the pairs back as affinityOf wrote them, memory included', () => {
    expect(affinityProducts(written)).toEqual([{ product: 'NVIDIA-H100-80GB-HBM3', memory: '81559' }]);
  });
});

describe('engineKeySecret', () => {
  it('holds the key under engine-key', () => {
    expect(engineKeySecret('qwen', 'llmgw', 'k')).toMatchObject({
      kind: 'Secret',
      metadata: { name: 'llmgw-qwen-engine-key', namespace: 'llmgw' },
      stringData: { 'engine-key': 'k' },
    });
  });
});

describe('workloadOf: what each engine’s pods ask of the node, and their security', () => {
  const cpuProfile = (): ProfileSpec => {
    const p = profile({ engine: 'llamacpp', cpu: true, gpus_per_node: 0, name: 'cpu' });
    delete p.gpu_class;
    return p;
  };
  const gguf: Origin = { ...origin, files: [{ path: 'q4.gguf', size: 5 * 2 ** 30 }] };
  const runsAsRoot = { seccompProfile: { type: 'RuntimeDefault' } };
  const nonRoot = { ...runsAsRoot, runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532 };
  it.each([
    // [engine, profile, requests, limits, shm, pod securityContext, the level it meets]
    [
      'vllm',
      profile({ engine: 'vllm' }),
      { cpu: '3', memory: '6144Mi' },
      {},
      '2048Mi',
      runsAsRoot,
      'baseline',
    ],
    [
      'sglang',
      profile({ engine: 'sglang', gpus_per_node: 4, tp: 4 }),
      { cpu: '6', memory: '18432Mi' },
      {},
      '8192Mi',
      runsAsRoot,
      'baseline',
    ],
    [
      'trtllm',
      profile({ engine: 'trtllm' }),
      { cpu: '3', memory: '6144Mi' },
      {},
      '2048Mi',
      runsAsRoot,
      'baseline',
    ],
    [
      'llamacpp on a card',
      profile({ engine: 'llamacpp' }),
      { cpu: '3', memory: '6144Mi' },
      {},
      '2048Mi',
      nonRoot,
      'restricted',
    ],
    ['llamacpp on CPUs', cpuProfile(), { cpu: '4', memory: '6144Mi' }, {}, '1024Mi', nonRoot, 'restricted'],
    [
      'llamacpp, min_memory_gb above its files',
      { ...cpuProfile(), min_memory_gb: 12 },
      { cpu: '4', memory: '12288Mi' },
      {},
      '1024Mi',
      nonRoot,
      'restricted',
    ],
  ] as const)('%s', (_what, p, requests, limits, shm, podContext, level) => {
    const d = workloadOf(input(p, { origin: p.engine === 'llamacpp' ? gguf : origin })) as KDeployment;
    const pod = d.spec?.template.spec;
    const c = pod?.containers[0];
    const { cpu, memory, ...gpus } = c?.resources?.requests ?? {};
    expect({ cpu, memory }).toEqual(requests);
    expect(c?.resources?.limits ?? {}).toEqual({ ...gpus, ...limits });
    expect(pod?.volumes?.[0]).toEqual({ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: shm } });
    expect(pod?.securityContext).toEqual(podContext);
    expect(c?.securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(standardProblems(pod as KPodSpec, 'baseline')).toEqual([]);
    expect(standardProblems(pod as KPodSpec, level)).toEqual([]);
    if (level === 'baseline')
      expect(standardProblems(pod as KPodSpec, 'restricted')).toEqual([
        'container engine may run as root (runAsNonRoot)',
      ]);
  });

  it('takes kubernetes.resources over its own counts, its memory as the limit too', () => {
    const s = { ...settings, resources: { cpu: '6', memory: '24Gi' } };
    const gpuPod = (workloadOf(input(profile({}), { settings: s })) as KDeployment).spec?.template.spec;
    expect(gpuPod?.containers[0]?.resources).toEqual({
      requests: { 'nvidia.com/gpu': '1', cpu: '6', memory: '24Gi' },
      limits: { 'nvidia.com/gpu': '1', memory: '24Gi' },
    });
    const cpuPod = (workloadOf(input(cpuProfile(), { settings: s, origin: gguf })) as KDeployment).spec
      ?.template.spec;
    const args = cpuPod?.containers[0]?.args ?? [];
    expect(args[args.indexOf('--threads') + 1]).toBe('6');
  });

  it('runs the downloader as llmgw’s non-root user, and every pod of a LeaderWorkerSet meets baseline', () => {
    const s = {
      ...settings,
      models: { pvc: '', mount_path: '/models', downloader_image: 'ghcr.io/x/llmgw:1' },
    };
    const d = workloadOf(input(cpuProfile(), { settings: s, origin: gguf })) as KDeployment;
    expect(d.spec?.template.spec?.initContainers?.[0]?.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
    });
    expect(standardProblems(d.spec?.template.spec as KPodSpec, 'restricted')).toEqual([]);
    const lws = workloadOf(
      input(profile({ nodes: 2, gpus_per_node: 8, tp: 8, pp: 2, name: 'big' }), { settings: s }),
    );
    for (const t of templatesOf(lws)) expect(standardProblems(t.spec as KPodSpec, 'baseline')).toEqual([]);
  });
});
