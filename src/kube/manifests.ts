import type {
  KContainer,
  KDeployment,
  KEnvVar,
  KPodSpec,
  KPodTemplate,
  KSecret,
  KVolume,
  KVolumeMount,
} from './kube-types.js';

import { isCpuProfile, type ModelSpec, type ProfileSpec } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';
import { engineFor } from '../engines/registry.js';
import type { EngineSettings, ProcessSpec, Weights } from '../engines/types.js';
import { originLayout } from '../models/cache-layout.js';
import type { Origin } from '../models/origin.js';

import { podExecutable, podImage } from './images.js';
import {
  labelValue,
  managedBy,
  modelLabel,
  profileLabel,
  secretName,
  specHash,
  specHashAnnotation,
  workloadName,
} from './names.js';
import { classOfLabels, memoryLabel, productLabel } from './node-classes.js';
import { podResources, type PodResources, type ResourceSettings } from './pod-resources.js';
import { containerSecurityContext, downloaderSecurityContext, podSecurityContext } from './pod-security.js';

/**
 * The objects that run one model's profile in Kubernetes: a Deployment (a LeaderWorkerSet
 * when the profile spans nodes) whose pods run the same command line the agent would run
 * (the engine modules' commands), the engine's key from a Secret, the GPUs requested from
 * the NVIDIA device plugin and pinned to the profile's class by GPU feature discovery labels.
 * Pure: table-tested in manifests.test.ts.
 */

/** The `kubernetes:` settings that shape pods. */
export interface PodSettings {
  namespace: string;
  models: { pvc: string; mount_path: string; downloader_image: string };
  runtime_class: string;
  engine_port: number;
  service_account: string;
  /** kubernetes.resources; absent, what llmgw counts (pod-resources.ts). */
  resources?: ResourceSettings | undefined;
}

export const modelNameAnnotation = 'llmgw.io/model-name';
export const engineKeyEnv = 'LLMGW_ENGINE_KEY';
export const engineKeySecretKey = 'engine-key';
/** The container of the engine, in every pod llmgw makes. */
export const engineContainer = 'engine';
/** Where rank 0 of a multi-node replica accepts the other ranks (torch.distributed). */
export const headPort = 29500;

export const lwsApiVersion = 'leaderworkerset.x-k8s.io/v1';

export interface LeaderWorkerSet {
  apiVersion: typeof lwsApiVersion;
  kind: 'LeaderWorkerSet';
  metadata: KDeployment['metadata'];
  spec: {
    replicas: number;
    leaderWorkerTemplate: {
      size: number;
      restartPolicy?: 'RecreateGroupOnPodRestart' | 'None';
      leaderTemplate: KPodTemplate;
      workerTemplate: KPodTemplate;
    };
  };
  status?: { readyReplicas?: number; replicas?: number };
}

export type Workload = KDeployment | LeaderWorkerSet;

export interface WorkloadInput {
  model: ModelSpec;
  profile: ProfileSpec & { image?: string };
  /** The model's pinned origin: where its files lie under the mount (the Hugging Face cache layout). */
  origin: Origin | undefined;
  replicas: number;
  settings: PodSettings;
  /** llama.cpp's slots when the profile does not say (agent.engines.llamacpp.parallel). */
  llamaParallel: number;
  /** The GFD labels of the cluster's cards, for node affinity. */
  products: ProductsByClass;
  /**
   * Where the download init container fetches from: hub.endpoint (a mirror of the hub), and a
   * Secret holding a hub token (HF_TOKEN, optional in the pod); unset, the image's HF_ENDPOINT
   * or the public hub, without a token.
   */
  hub?: { endpoint?: string | undefined; tokenSecret?: { name: string; key: string } | undefined };
}

const sentinelKey = '\u0000llmgw-engine-key\u0000';

/** The labels of every object of this model's profile (and the selector of its pods). */
export function workloadLabels(model: string, profile: string): Record<string, string> {
  return {
    [managedBy.key]: managedBy.value,
    [modelLabel]: labelValue(model),
    [profileLabel]: labelValue(profile),
  };
}

/** The Secret holding the model's engine key: the gateway sends it, the engine requires it. */
export function engineKeySecret(model: string, namespace: string, key: string): KSecret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secretName(model),
      namespace,
      labels: { [managedBy.key]: managedBy.value, [modelLabel]: labelValue(model) },
      annotations: { [modelNameAnnotation]: model },
    },
    type: 'Opaque',
    stringData: { [engineKeySecretKey]: key },
  };
}

export const hubTokenSecretName = 'llmgw-hub-token';
export const hubTokenSecretKey = 'token';

/** hub.token for the download init containers (HF_TOKEN), in llmgw's namespace. */
export function hubTokenSecret(namespace: string, token: string): KSecret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: hubTokenSecretName,
      namespace,
      labels: { [managedBy.key]: managedBy.value },
    },
    type: 'Opaque',
    stringData: { [hubTokenSecretKey]: token },
  };
}

/** The Deployment, or LeaderWorkerSet, of one model's profile. Throws LlmgwError for what cannot run. */
export function workloadOf(input: WorkloadInput): Workload {
  const { model, profile, settings } = input;
  const name = workloadName(model.name, profile);
  const labels = workloadLabels(model.name, profile.name);
  const multi = profile.nodes > 1;
  const leader = podTemplate(input, 0);
  // The hash is of what the pods run, not of how many there are: a scale is no rollout.
  const hash = specHash(multi ? [leader, podTemplate(input, 1)] : leader);
  const annotations = { [specHashAnnotation]: hash, [modelNameAnnotation]: model.name };
  const stamp = (t: KPodTemplate): KPodTemplate => ({
    ...t,
    metadata: { ...t.metadata, annotations: { ...t.metadata?.annotations, ...annotations } },
  });
  const metadata = { name, namespace: settings.namespace, labels, annotations };
  if (!multi) {
    return {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata,
      spec: {
        replicas: input.replicas,
        selector: { matchLabels: labels },
        // A replica holds GPUs: a surge would wait for cards the old pod still holds.
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
        template: stamp(leader),
      },
    };
  }
  return {
    apiVersion: lwsApiVersion,
    kind: 'LeaderWorkerSet',
    metadata,
    spec: {
      replicas: input.replicas,
      leaderWorkerTemplate: {
        size: profile.nodes,
        // One rank lost is the whole replica lost (NCCL): the group starts again together.
        restartPolicy: 'RecreateGroupOnPodRestart',
        leaderTemplate: stamp(leader),
        workerTemplate: stamp(podTemplate(input, 1)),
      },
    },
  };
}

/** The files the engine is given: the snapshot under the mount, or a local path as it is. */
export function podWeights(origin: Origin | undefined, mountPath: string, source: string): Weights {
  if (origin === undefined) {
    throw new LlmgwError(
      'unavailable',
      `the source ${source} is not resolved yet: its pods are made once it is (llmgw ctl models shows why it is not)`,
    );
  }
  const layout = originLayout(mountPath, origin);
  const files = origin.files.map((f) => f.path);
  if (layout === undefined) return { path: origin.source, files };
  return { path: layout.snapshotDir, files };
}

/** The pod of one rank: 0 (the leader, serving HTTP), or any worker rank (1 stands for all). */
function podTemplate(input: WorkloadInput, rank: number): KPodTemplate {
  const { model, profile, settings } = input;
  const engine = engineFor(profile.engine);
  const gpu = !isCpuProfile(profile);
  const ranks = profile.nodes;
  const weights = podWeights(input.origin, settings.models.mount_path, model.source);
  const bin = podExecutable(profile.engine);
  const resources = podResources({
    profile,
    weightsBytes: (input.origin?.files ?? []).reduce((n, f) => n + f.size, 0),
    settings: settings.resources,
  });
  const engineSettings: EngineSettings = {
    bin,
    llamacpp: { parallel: input.llamaParallel, threads: 0 },
    cpuCount: 0,
  };
  const processes = engine.commands({
    replica: workloadName(model.name, profile),
    model,
    profile,
    rank,
    ranks,
    host: '0.0.0.0',
    port: settings.engine_port,
    ...(ranks > 1 ? { head: { address: '$(LWS_LEADER_ADDRESS)', port: headPort } } : {}),
    devices: [],
    // A CPU engine uses the CPUs its pod requests (the node's count is not known here).
    threads: resources.threads,
    apiKey: sentinelKey,
    weights,
    settings: engineSettings,
  });
  const main = processes[0];
  if (main === undefined || processes.length > 1) {
    throw new LlmgwError(
      'invalid_argument',
      `profile "${profile.name}" of ${model.name} runs ${processes.length} processes per node, and a pod runs one engine: use another engine for Kubernetes`,
    );
  }
  const serves = engine.servesHttp(rank, ranks);
  const container = engineContainerOf(main, input, { rank, serves, gpu, resources });
  // Memory-backed: what it holds counts as the pod's memory, so it is bounded.
  const volumes: KVolume[] = [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: resources.shm } }];
  const initContainers: KContainer[] = [];
  const { pvc, mount_path, downloader_image } = settings.models;
  if (pvc !== '') {
    volumes.push({ name: 'models', persistentVolumeClaim: { claimName: pvc, readOnly: true } });
  } else if (input.origin?.kind !== 'path') {
    if (downloader_image === '') {
      throw new LlmgwError(
        'invalid_argument',
        `${model.name}'s files have nowhere to come from in Kubernetes: set kubernetes.models.pvc to a PersistentVolumeClaim holding them, or kubernetes.models.downloader_image to an llmgw image that downloads them into each pod`,
      );
    }
    volumes.push({ name: 'models', emptyDir: {} });
    initContainers.push(downloaderOf(input, downloader_image, mount_path));
  }
  const spec: KPodSpec = {
    containers: [container],
    ...(initContainers.length === 0 ? {} : { initContainers }),
    volumes,
    // The engine's key is read from the Secret; the API's token is of no use to it.
    automountServiceAccountToken: false,
    securityContext: podSecurityContext(profile.engine),
    ...(settings.service_account === '' ? {} : { serviceAccountName: settings.service_account }),
    ...(settings.runtime_class === '' ? {} : { runtimeClassName: settings.runtime_class }),
    ...(gpu && profile.gpu_class !== undefined
      ? { affinity: affinityOf(profile.gpu_class, input.products) }
      : {}),
    // Engines finish what they compute on SIGTERM within this.
    terminationGracePeriodSeconds: 60,
  };
  return {
    metadata: { labels: workloadLabels(model.name, profile.name) },
    spec,
  };
}

/**
 * The init container that fills the emptyDir: `llmgw fetch` (src/cli/run-fetch.ts) given the
 * origin the control plane pinned, so the pod fetches exactly those files at that commit (no
 * second resolution that could pick others) into the layout podWeights points the engine at.
 */
function downloaderOf(input: WorkloadInput, image: string, mountPath: string): KContainer {
  const { model, origin, hub } = input;
  const env: KEnvVar[] = [];
  if (hub?.endpoint !== undefined && hub.endpoint !== '')
    env.push({ name: 'HF_ENDPOINT', value: hub.endpoint });
  if (hub?.tokenSecret !== undefined) {
    env.push({
      name: 'HF_TOKEN',
      valueFrom: { secretKeyRef: { name: hub.tokenSecret.name, key: hub.tokenSecret.key, optional: true } },
    });
  }
  return {
    name: 'download',
    image,
    command: ['llmgw'],
    args: [
      'fetch',
      model.source,
      '--into',
      mountPath,
      ...(origin?.commit === undefined ? [] : ['--revision', origin.commit]),
      '--origin',
      originArg(origin),
    ],
    ...(env.length === 0 ? {} : { env }),
    volumeMounts: [{ name: 'models', mountPath }],
    securityContext: downloaderSecurityContext(),
  };
}

/** The origin as JSON with its keys in one order, whatever order it was read in: no rollout for a reorder. */
function originArg(o: Origin | undefined): string {
  if (o === undefined) return '';
  const files = o.files.map((f) => ({
    path: f.path,
    size: f.size,
    ...(f.sha256 === undefined ? {} : { sha256: f.sha256 }),
    ...(f.etag === undefined ? {} : { etag: f.etag }),
  }));
  return JSON.stringify({
    source: o.source,
    kind: o.kind,
    ...(o.repo === undefined ? {} : { repo: o.repo }),
    revision: o.revision,
    ...(o.commit === undefined ? {} : { commit: o.commit }),
    files,
  });
}

function engineContainerOf(
  p: ProcessSpec,
  input: WorkloadInput,
  at: { rank: number; serves: boolean; gpu: boolean; resources: PodResources },
): KContainer {
  const { rank, serves, gpu, resources } = at;
  const { profile, settings, model } = input;
  const keyRef = `$(${engineKeyEnv})`;
  let args = p.args.map((a) => (a === sentinelKey ? keyRef : a));
  // Every worker runs the worker's command; the LeaderWorkerSet tells each its index.
  if (rank > 0) args = args.map((a, i) => (args[i - 1] === '--node-rank' ? '$(LWS_WORKER_INDEX)' : a));
  const env: KEnvVar[] = [
    {
      name: engineKeyEnv,
      valueFrom: { secretKeyRef: { name: secretName(model.name), key: engineKeySecretKey } },
    },
  ];
  for (const [name, value] of Object.entries(p.env)) {
    // The device plugin gives the pod its devices (NVIDIA_VISIBLE_DEVICES): an empty list would hide them.
    if (name === 'CUDA_VISIBLE_DEVICES') continue;
    env.push(value === sentinelKey ? { name, value: keyRef } : { name, value });
  }
  const mounts: KVolumeMount[] = [{ name: 'shm', mountPath: '/dev/shm' }];
  if (settings.models.pvc !== '' || input.origin?.kind !== 'path')
    mounts.push({ name: 'models', mountPath: settings.models.mount_path, readOnly: true });
  const engine = engineFor(profile.engine);
  return {
    name: engineContainer,
    image: podImage(profile.engine, gpu, profile.image),
    command: [p.bin],
    args,
    env,
    ...(serves ? { ports: [{ name: 'http', containerPort: settings.engine_port }] } : {}),
    resources: {
      requests: resources.requests,
      ...(Object.keys(resources.limits).length === 0 ? {} : { limits: resources.limits }),
    },
    ...(serves
      ? {
          readinessProbe: {
            httpGet: { path: engine.healthPath, port: 'http' },
            periodSeconds: 5,
            failureThreshold: 3,
          },
          // Loading a large model takes minutes: liveness starts counting once it answered.
          startupProbe: {
            httpGet: { path: engine.healthPath, port: 'http' },
            periodSeconds: 10,
            failureThreshold: 180,
          },
        }
      : {}),
    volumeMounts: mounts,
    securityContext: containerSecurityContext(),
  };
}

/** A label operators may put on nodes without GPU feature discovery: `llmgw.io/gpu-class=h100-80g`. */
export const classLabel = 'llmgw.io/gpu-class';

/** A card model as GFD labels it: `NVIDIA-H100-80GB-HBM3`, with its memory in MiB where labelled. */
export interface ProductPair {
  product: string;
  memory: string | undefined;
}

/** The GFD (product, memory) pairs seen on the cluster's nodes that make up each card class. */
export type ProductsByClass = Map<string, ProductPair[]>;

/** The whole card's class of a device class: `a100-80g` of `a100-80g-mig-3g.40gb`. */
function cardOf(gpuClass: string): string {
  return gpuClass.replace(/-mig-.*$/, '');
}

export function productsByClass(
  nodes: readonly { labels?: Record<string, string> | undefined }[],
): ProductsByClass {
  const out: ProductsByClass = new Map();
  for (const n of nodes) {
    const cls = classOfLabels(n.labels);
    const product = n.labels?.[productLabel];
    if (cls === undefined || product === undefined) continue;
    const memory = n.labels?.[memoryLabel];
    const pairs = out.get(cls) ?? [];
    if (!pairs.some((p) => p.product === product && p.memory === memory)) pairs.push({ product, memory });
    out.set(
      cls,
      pairs.sort((a, b) => `${a.product}/${a.memory ?? ''}`.localeCompare(`${b.product}/${b.memory ?? ''}`)),
    );
  }
  return out;
}

/**
 * Required node affinity for a class: GFD writes the product's own name
 * (`NVIDIA-H100-80GB-HBM3`, `NVIDIA-H100-PCIe`), which llmgw maps to a class but cannot
 * write back, so each (product, memory) pair seen on the cluster's nodes of that card class
 * is one term; nodes labelled `llmgw.io/gpu-class=<card class>` by hand match too.
 */
export function affinityOf(gpuClass: string, products: ProductsByClass): NonNullable<KPodSpec['affinity']> {
  const card = cardOf(gpuClass);
  const terms = (products.get(card) ?? []).map((p) => ({
    matchExpressions: [
      { key: productLabel, operator: 'In', values: [p.product] },
      ...(p.memory === undefined ? [] : [{ key: memoryLabel, operator: 'In', values: [p.memory] }]),
    ],
  }));
  terms.push({ matchExpressions: [{ key: classLabel, operator: 'In', values: [card] }] });
  return { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } };
}

/** The pod templates of a workload: a Deployment's one; a LeaderWorkerSet's leader, then worker. */
export function templatesOf(w: Workload): KPodTemplate[] {
  if (w.kind === 'LeaderWorkerSet') {
    const t = (w as LeaderWorkerSet).spec.leaderWorkerTemplate;
    return [t.leaderTemplate, t.workerTemplate];
  }
  const t = (w as KDeployment).spec?.template;
  return t === undefined ? [] : [t];
}

/** The (product, memory) pairs a written workload's required node affinity names; undefined without one. */
export function affinityProducts(w: Workload): ProductPair[] | undefined {
  const terms =
    templatesOf(w)[0]?.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms;
  if (terms === undefined) return undefined;
  const out: ProductPair[] = [];
  for (const term of terms) {
    const values = (key: string) =>
      term.matchExpressions?.find((e) => e.key === key && e.operator === 'In')?.values;
    const product = values(productLabel)?.[0];
    if (product !== undefined) out.push({ product, memory: values(memoryLabel)?.[0] });
  }
  return out;
}

/**
 * The workload to write. A card model of the profile's class newly seen on the cluster (or
 * one gone) changes the pods' affinity, and so their template: every pod would be replaced,
 * one at a time, for nothing, as the placed ones run well where they are. So while none of
 * the workload's pods waits for a node, and the affinity is all that would change, the one
 * it was written with is kept; a pod waiting (a scale-up, a node lost) brings the new one in.
 */
export function keepingPlacedPods(
  input: WorkloadInput,
  current: Workload | undefined,
  podsWaiting: boolean,
): Workload {
  const fresh = workloadOf(input);
  const gpuClass = input.profile.gpu_class;
  if (current === undefined || podsWaiting || gpuClass === undefined || current.kind !== fresh.kind)
    return fresh;
  const written = affinityProducts(current);
  if (written === undefined) return fresh;
  const card = cardOf(gpuClass);
  const kept = workloadOf({ ...input, products: new Map([...input.products, [card, written]]) });
  const hash = (w: Workload) => w.metadata?.annotations?.[specHashAnnotation];
  return hash(kept) === hash(current) ? kept : fresh;
}
