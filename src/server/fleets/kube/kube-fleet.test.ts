import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import type { ModelSpec, ProfileSpec } from '../../../catalog/model-spec.js';
import type { KubeCluster } from '../../../kube/client.js';
import type { KDeployment } from '../../../kube/kube-types.js';
import type { KNode, KPod } from '../../../kube/kube-types.js';
import { modelLabel, profileLabel } from '../../../kube/names.js';
import type { Origin } from '../../../models/origin.js';
import type { Store } from '../../../store/store.js';
import type { Catalog } from '../../state/catalog.js';
import { EngineKeys } from '../engine-keys.js';

import { KubeFleet } from './kube-fleet.js';
import { lineSplitter } from './pod-logs.js';
import { chooseProfile } from './workload-writer.js';

const profile = (name: string, p: Partial<ProfileSpec>): ProfileSpec => ({
  name,
  engine: 'vllm',
  tp: 1,
  pp: 1,
  gpus_per_node: 1,
  nodes: 1,
  args: [],
  env: {},
  adapters: [],
  ...p,
});
const spec: ModelSpec = {
  name: 'qwen',
  source: 'hf:Qwen/Qwen3-8B',
  replicas: 1,
  profiles: [
    profile('h100', { gpu_class: 'h100-80g' }),
    profile('mig', { gpu_class: 'a100-80g-mig-3g.40gb' }),
    profile('cpu', { engine: 'llamacpp', cpu: true, gpus_per_node: 0 }),
  ],
};

describe('chooseProfile', () => {
  it.each([
    ['the first whose class the nodes offer', ['h100-80g', 'a100-80g-mig-3g.40gb'], [], 'h100'],
    ['a MIG class offered', ['a100-80g-mig-3g.40gb'], [], 'mig'],
    ['a CPU profile when no class is offered', [], [], 'cpu'],
    ['the one already running, whatever is offered', ['h100-80g'], ['llmgw-qwen-mig'], 'mig'],
  ])('%s', (_, offered, existing, want) => {
    const chosen = chooseProfile(spec, new Set(offered), new Map(existing.map((n) => [n, {}])));
    expect(chosen.name).toBe(want);
  });

  it('falls back to the first profile, whose pods then wait', () => {
    const gpuOnly = { ...spec, profiles: spec.profiles.slice(0, 2) };
    expect(chooseProfile(gpuOnly, new Set(), new Map()).name).toBe('h100');
  });
});

describe('KubeFleet writes only while it leads', () => {
  const origin: Origin = {
    source: spec.source,
    kind: 'hf',
    repo: 'Qwen/Qwen3-8B',
    revision: 'main',
    commit: 'a'.repeat(40),
    files: [{ path: 'config.json', size: 1 }],
  };
  const setup = (
    leads: boolean,
    pods: KPod[] = [],
    log = '',
    hubAtStart?: { endpoint?: string; token?: string },
    overrides: Partial<KubeCluster> = {},
  ) => {
    let hub = hubAtStart;
    const applied: string[] = [];
    const objects: unknown[] = [];
    const removed: string[] = [];
    const cluster: KubeCluster = {
      nodes: () => [],
      pods: () => pods,
      workloads: () => [],
      leaderWorkerSets: true,
      onChange: () => undefined,
      apply: (o) => {
        applied.push(`${o.kind ?? ''}/${o.metadata?.name ?? ''}`);
        objects.push(o);
        return Promise.resolve();
      },
      remove: (kind, name) => {
        removed.push(`${kind}/${name}`);
        return Promise.resolve();
      },
      readSecret: () => Promise.resolve(undefined),
      podLog: (_pod, o) => {
        // As the API answers: in chunks that need not end at a line's end.
        for (let i = 0; i < log.length; i += 7) o.onText(log.slice(i, i + 7));
        return Promise.resolve();
      },
      deletePod: () => Promise.resolve(),
      warningEvents: () => Promise.resolve([]),
      stop: () => Promise.resolve(),
      ...overrides,
    };
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
    const catalog = {
      specs: () => Promise.resolve([{ ...spec, profiles: [profile('h100', { gpu_class: 'h100-80g' })] }]),
      origins: () => Promise.resolve(new Map([[spec.name, origin]])),
    } as unknown as Catalog;
    const fleet = new KubeFleet({
      cluster,
      catalog,
      store,
      keys: new EngineKeys('s'.repeat(40), 'test'),
      logger: pino({ level: 'silent' }),
      settings: () => ({
        pods: {
          namespace: 'llmgw',
          models:
            hub === undefined
              ? { pvc: 'models', mount_path: '/models', downloader_image: '' }
              : { pvc: '', mount_path: '/models', downloader_image: 'llmgw:dev' },
          runtime_class: '',
          engine_port: 8000,
          service_account: '',
        },
        llamaParallel: 4,
        hub,
      }),
      leader: {
        leads: () => leads,
        fence: () => undefined,
        lost: () => undefined,
        onChange: () => undefined,
      },
    });
    return { fleet, applied, objects, removed, setHub: (h: typeof hub) => (hub = h) };
  };

  it('a follower writes nothing, but shows the replicas it waits for', async () => {
    const { fleet, applied } = setup(false);
    await fleet.reconcile();
    expect(applied).toEqual([]);
    expect(fleet.replicas().map((r) => [r.model, r.state])).toEqual([['qwen', 'pending']]);
  });

  it('the leader writes the Secret, then the Deployment', async () => {
    const { fleet, applied } = setup(true);
    await fleet.reconcile();
    expect(applied).toEqual(['Secret/llmgw-qwen-engine-key', 'Deployment/llmgw-qwen-h100']);
  });

  it('keeps placed pods where they are when a new card model of their class joins; a pod waiting for a node takes it in', async () => {
    const node = (name: string, product: string): KNode => ({
      metadata: {
        name,
        labels: { 'nvidia.com/gpu.product': product, 'nvidia.com/gpu.memory': '81559' },
      },
      status: { allocatable: { 'nvidia.com/gpu': '2' } },
    });
    const nodes = [node('gpu-1', 'NVIDIA-H100-80GB-HBM3')];
    const pods: KPod[] = [];
    // What the API server holds: the Deployment as last written.
    const held: { deployment?: KDeployment } = {};
    const { fleet, objects } = setup(true, pods, '', undefined, {
      nodes: () => nodes,
      workloads: () => (held.deployment === undefined ? [] : [held.deployment]),
    });
    const deployments = () =>
      objects.filter((o): o is KDeployment => (o as KDeployment).kind === 'Deployment');
    const products = (d: KDeployment | undefined) =>
      d?.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms.flatMap(
        (t) => t.matchExpressions?.find((e) => e.key === 'nvidia.com/gpu.product')?.values ?? [],
      );
    await fleet.reconcile();
    held.deployment = deployments().at(-1);
    const written = held.deployment;
    expect(products(written)).toEqual(['NVIDIA-H100-80GB-HBM3']);

    // An H100 PCIe node (the same class, h100-80g) joins; the one pod runs on gpu-1.
    nodes.push(node('gpu-2', 'NVIDIA-H100-PCIe'));
    pods.push({
      metadata: { name: 'llmgw-qwen-h100-a-1', labels: written?.spec?.selector.matchLabels ?? {} },
      spec: { nodeName: 'gpu-1', containers: [] },
      status: { phase: 'Running' },
    });
    await fleet.reconcile();
    expect(deployments()).toHaveLength(1);

    // A second pod that waits for a node: the affinity takes the new card model in.
    pods.push({
      metadata: { name: 'llmgw-qwen-h100-a-2', labels: written?.spec?.selector.matchLabels ?? {} },
      spec: { containers: [] },
      status: { phase: 'Pending' },
    });
    await fleet.reconcile();
    expect(deployments()).toHaveLength(2);
    expect(products(deployments().at(-1))).toEqual(['NVIDIA-H100-80GB-HBM3', 'NVIDIA-H100-PCIe']);
  });

  it('tells a pod the kubelet started again, loading, as coming back, and one in a crash loop as unavailable', async () => {
    const pod = (restartCount: number, waiting?: { reason: string; message: string }): KPod => ({
      metadata: {
        name: 'llmgw-qwen-h100-a-1',
        labels: { [modelLabel]: 'qwen', [profileLabel]: 'h100' },
      },
      spec: { nodeName: 'gpu-1', containers: [] },
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'False' }],
        containerStatuses: [
          {
            name: 'engine',
            ready: false,
            restartCount,
            image: 'x',
            imageID: '',
            state: waiting === undefined ? { running: {} } : { waiting },
          },
        ],
      },
    });
    const pods: KPod[] = [pod(1)];
    const { fleet } = setup(false, pods);
    const entry = async () => (await fleet.routeTable()).models.find((m) => m.name === 'qwen');
    expect(await entry()).toMatchObject({
      restarting: {
        reason:
          'replica llmgw-qwen-h100-a-1 is starting again after its engine failed: the engine is loading (not ready yet)',
      },
    });
    expect((await entry())?.unavailable).toBeUndefined();
    pods[0] = pod(4, { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' });
    expect(await entry()).toMatchObject({
      unavailable:
        'replica llmgw-qwen-h100-a-1 failed: engine: CrashLoopBackOff: back-off 40s restarting failed container',
    });
    expect((await entry())?.restarting).toBeUndefined();
  });

  it('gives the download init container hub.endpoint, and hub.token through a Secret of its own', async () => {
    const { fleet, applied, objects, removed, setHub } = setup(true, [], '', {
      endpoint: 'https://hf-mirror.lab',
      token: 'hf_secret',
    });
    await fleet.reconcile();
    expect(applied).toEqual([
      'Secret/llmgw-hub-token',
      'Secret/llmgw-qwen-engine-key',
      'Deployment/llmgw-qwen-h100',
    ]);
    expect(objects[0]).toMatchObject({ stringData: { token: 'hf_secret' } });
    const init = (objects[2] as KDeployment).spec?.template.spec?.initContainers?.[0];
    expect(init?.env).toEqual([
      { name: 'HF_ENDPOINT', value: 'https://hf-mirror.lab' },
      {
        name: 'HF_TOKEN',
        valueFrom: { secretKeyRef: { name: 'llmgw-hub-token', key: 'token', optional: true } },
      },
    ]);
    // The token is not in the Deployment itself.
    expect(JSON.stringify(objects[2])).not.toContain('hf_secret');
    // Unset: its Secret is deleted.
    setHub({ endpoint: 'https://hf-mirror.lab' });
    await fleet.reconcile();
    expect(removed).toEqual(['Secret/llmgw-hub-token']);
  });

  describe('KubeFleet.logs', () => {
    const pod = (name: string, status: KPod['status'], labels: Record<string, string> = {}): KPod => ({
      metadata: { name, labels: { 'llmgw.io/model': 'qwen', 'llmgw.io/profile': 'h100', ...labels } },
      spec: {
        containers: [{ name: 'engine' }],
        nodeName: 'gpu-1',
      },
      status,
    });
    const ready = pod('p-ready', {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
    });
    const downloading = pod('p-dl', {
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'True' }],
      initContainerStatuses: [
        { name: 'download', image: 'x', imageID: '', ready: false, restartCount: 0, state: { running: {} } },
      ],
    });
    const logs = async (fleet: KubeFleet, id: string, rank = 0) => {
      const out: string[][] = [];
      await fleet.logs(id, {
        rank,
        tail: 10,
        follow: false,
        signal: new AbortController().signal,
        onLines: (l) => out.push(l),
      });
      return out.flat();
    };

    it('gives whole lines, the unfinished last one at the end', async () => {
      const { fleet } = setup(true, [ready], 'loading the weights\nserving on :8000\nno newline');
      expect(await logs(fleet, 'p-ready')).toEqual(['loading the weights', 'serving on :8000', 'no newline']);
    });

    it('refuses a rank the replica lacks, a replica not there, and an engine waiting on its downloader', async () => {
      const { fleet } = setup(true, [ready, downloading]);
      await expect(logs(fleet, 'p-ready', 1)).rejects.toThrow(
        'replica p-ready has no rank 1 (its one pod is rank 0)',
      );
      await expect(logs(fleet, 'nope')).rejects.toThrow('no replica is named "nope"');
      await expect(logs(fleet, 'p-dl')).rejects.toThrow(
        "replica p-dl's engine has not started: init container download is fetching the model's files; its progress: kubectl -n llmgw logs p-dl -c download",
      );
    });
  });
});

describe('lineSplitter', () => {
  it.each([
    { chunks: ['a\nb\n'], lines: [['a', 'b']], rest: [] },
    { chunks: ['a\nb'], lines: [['a']], rest: ['b'] },
    { chunks: ['', 'par', 'tial\nnext\n'], lines: [[], [], ['partial', 'next']], rest: [] },
    { chunks: ['\n\n'], lines: [['', '']], rest: [] },
  ])('splits $chunks into whole lines', ({ chunks, lines, rest }) => {
    const s = lineSplitter();
    expect(chunks.map((c) => s.push(c))).toEqual(lines);
    expect(s.end()).toEqual(rest);
  });
});
