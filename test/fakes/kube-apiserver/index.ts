/**
 * An in-process fake Kubernetes API server for tests: real HTTP on 127.0.0.1, the real API's paths,
 * objects, Status errors, list/watch with resourceVersion, and simulated control loops (deployments,
 * replica sets, LeaderWorkerSets, a scheduler, a kubelet that runs pods through a test's hook).
 *
 * Exported API (stable; other tests build on it):
 *
 *   startFakeKubeApiServer(opts?: FakeKubeOptions): Promise<FakeKubeApiServer>
 *     opts.token               bearer token the server requires (default 'fake-token'; null: no auth)
 *     opts.namespaces          namespaces that exist at start (default default, kube-system, kube-public, kube-node-lease)
 *     opts.nodes               NodeSpec[] added at start
 *     opts.controllers         {deployments, leaderWorkerSets, scheduler, kubelet}: each on unless false
 *     opts.kubelet             KubeletHook: (pod, node) => RunningPod | FailingPod | undefined, called once per
 *                              scheduled pod; FailingPod {fails: 'mount' | 'image', message}: the kubelet's
 *                              FailedMount, or Failed/BackOff and ImagePullBackOff, in the pod's status and events
 *     opts.probeScale          readiness probe periods are multiplied by this (default 0.02: 10 s -> 200 ms)
 *     opts.historyLimit        changes kept for watches; older resourceVersions get 410 Gone (default 10000)
 *     opts.bookmarkIntervalMs  BOOKMARK period for allowWatchBookmarks watches (default 1000)
 *     opts.fieldValidation     default when a request sends none: 'Strict' (default; real servers: Warn), 'Warn', 'Ignore'
 *
 *   FakeKubeApiServer
 *     url, port, token                      http://127.0.0.1:PORT, the port, the token (undefined: no auth)
 *     kubeconfig(opts?: {namespace?}): Promise<string>   writes a kubeconfig file (server, token), returns its path
 *     kubeconfigYaml(opts?: {namespace?}): string
 *     addNode(spec: NodeSpec): KubeObject    a Ready node with labels, allocatable, taints
 *     create(obj): KubeObject               store an object as a client's POST would (kind from apiVersion/kind)
 *     get(kind, namespace, name): KubeObject | undefined     kind: 'Pod' or 'pods'
 *     objects(kind, namespace?): KubeObject[]
 *     events(filter?: {namespace?, reason?, involvedName?}): KubeObject[]
 *     setPodReady(namespace, name, ready): void     overrides probes for that pod
 *     crashPod(namespace, name, exit?: {exitCode?, reason?, message?}): void   CrashLoopBackOff, restartCount+1,
 *                                    lastState.terminated, not ready; setPodReady(ns, name, true) runs it again
 *     setNodeReady(name, ready): void   false: Ready Unknown, unreachable taints, its pods not ready (not evicted)
 *     deletePod(namespace, name, opts?: DeleteOptions): KubeObject
 *     waitFor<T>(fn: () => T | undefined | false, timeoutMs?): Promise<T>   polls until fn returns a truthy value
 *     setHistoryLimit(n): void; compact(): void     compact(): every watch from an older resourceVersion gets 410
 *     dropWatches(): void                            ends open watches (clients reconnect from their last resourceVersion)
 *     silenceWatches(): void                         open watches write nothing more (no events, bookmarks or timeout end)
 *                                    and stay open, as a connection whose peer vanished
 *     resetWatches(): void                           breaks open watches' connections mid-stream (no clean end)
 *     failWatches(times): void                       the next `times` watch requests get 500 InternalError
 *     admitPods(check?: PodAdmission): void   pods the controllers create are refused while check returns words
 *                                    (`exceeded quota: ...`): 403 `pods "NAME" is forbidden: WORDS`, a ReplicaSet's
 *                                    FailedCreate event and ReplicaFailure condition (its Deployment's too), a
 *                                    LeaderWorkerSet's StatefulSet's FailedCreate event; undefined admits again
 *     forbid(verb, resource): void; allow(verb, resource): void   RBAC denies it (403 Forbidden in the authorizer's
 *                                    words) until allowed again; verb get|list|watch|create|update|patch|delete,
 *                                    resource as RBAC names it: 'pods/log', 'deployments.apps'
 *     watchStats: {gone, open, lists}                watches answered 410 so far, watches open now, lists answered
 * A PUT of a custom resource (LeaderWorkerSet) without metadata.resourceVersion is refused 422, as CRDs are.
 *     resourceVersion: string                       the current global resourceVersion
 *     close(): Promise<void>                        ends watches, stops pods (hooks' stop), closes the port
 *
 *   validateObject(obj: unknown): Problem[]   what the server would refuse ({field, message, decoding?}); [] = valid.
 *     For a chart's rendered documents: decoding problems (unknown field, wrong type) are what the server answers
 *     400 "strict decoding error" with fieldValidation=Strict; the others are its 422 Invalid causes.
 *   parseQuantity(q): number | undefined;  RESOURCES, resourceByKind;  types KubeObject, NodeSpec, RunningPod, KubeletHook
 *
 * Things a client meets as on a real cluster:
 *   - kubeconfig() sets insecure-skip-tls-verify (client-node refuses plain http otherwise).
 *   - client-node's typed APIs drop fields their models lack before sending; unknown fields reach the server
 *     only through raw JSON, CustomObjectsApi and server-side apply (500 "field not declared in schema").
 *   - Namespaced objects need their namespace (404 `namespaces "x" not found`); pods are deleted gracefully
 *     (deletionTimestamp, then the hook's stop, then DELETED) unless gracePeriodSeconds=0 or unscheduled.
 *   - A rollout that cannot surge (no room for the new pod) waits, as it does on a real cluster.
 *   - Built-in kinds' list items carry no apiVersion/kind; watch events' objects do.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { type ControllerSwitches, Controllers, type KubeletHook, type PodAdmission } from './controllers.js';
import { applyDefaults } from './defaults.js';
import { type KubeObject, type ObjectMeta, Registry } from './registry.js';
import { apiVersionOf, RESOURCES, resourceByKind, type ResourceType } from './resources.js';
import { type DeleteOptions, deleteObject, HttpFront, type ServerHooks } from './server.js';
import { validateForServer } from './validation.js';
import './schema.js';

export { validateObject, type Problem } from './validation.js';
export { parseQuantity } from './quantity.js';
export { RESOURCES, resourceByKind, type ResourceType } from './resources.js';
export type { KubeObject } from './registry.js';
export type { DeleteOptions } from './server.js';
export type { ControllerSwitches, FailingPod, KubeletHook, PodAdmission, RunningPod } from './controllers.js';

export interface NodeSpec {
  name: string;
  labels?: Record<string, string>;
  /** e.g. {cpu: '32', memory: '256Gi', 'nvidia.com/gpu': '8'}; cpu 8, memory 32Gi and 110 pods by default. */
  allocatable?: Record<string, string | number>;
  taints?: { key: string; value?: string; effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute' }[];
  unschedulable?: boolean;
  /** The node's InternalIP (hostIP of its pods); 127.0.0.1 by default. */
  address?: string;
}

/** An object as a client sends it: apiVersion, kind, some metadata, the rest of its kind. */
export interface ObjectInput {
  apiVersion: string;
  kind: string;
  metadata?: Partial<ObjectMeta>;
  [field: string]: any;
}

export interface FakeKubeOptions {
  token?: string | null;
  namespaces?: string[];
  nodes?: NodeSpec[];
  controllers?: Partial<ControllerSwitches>;
  kubelet?: KubeletHook;
  probeScale?: number;
  historyLimit?: number;
  bookmarkIntervalMs?: number;
  fieldValidation?: 'Strict' | 'Warn' | 'Ignore';
}

export interface FakeKubeApiServer {
  readonly url: string;
  readonly port: number;
  readonly token: string | undefined;
  readonly resourceVersion: string;
  kubeconfig(opts?: { namespace?: string }): Promise<string>;
  kubeconfigYaml(opts?: { namespace?: string }): string;
  addNode(spec: NodeSpec): KubeObject;
  create(obj: ObjectInput): KubeObject;
  get(kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
  objects(kind: string, namespace?: string): KubeObject[];
  events(filter?: { namespace?: string; reason?: string; involvedName?: string }): KubeObject[];
  setPodReady(namespace: string, name: string, ready: boolean): void;
  setNodeReady(name: string, ready: boolean): void;
  crashPod(
    namespace: string,
    name: string,
    exit?: { exitCode?: number; reason?: string; message?: string },
  ): void;
  deletePod(namespace: string, name: string, opts?: DeleteOptions): KubeObject;
  waitFor<T>(fn: () => T | undefined | false | null, timeoutMs?: number): Promise<T>;
  setHistoryLimit(n: number): void;
  compact(): void;
  dropWatches(): void;
  silenceWatches(): void;
  resetWatches(): void;
  failWatches(times: number): void;
  admitPods(check?: PodAdmission): void;
  forbid(verb: string, resource: string): void;
  allow(verb: string, resource: string): void;
  readonly watchStats: { readonly gone: number; readonly open: number; readonly lists: number };
  close(): Promise<void>;
}

function resourceFor(kind: string): ResourceType {
  const rt = RESOURCES.find(
    (r) => r.kind === kind || r.plural === kind || r.kind.toLowerCase() === kind.toLowerCase(),
  );
  if (!rt) throw new Error(`the fake API server does not serve ${kind}`);
  return rt;
}

export async function startFakeKubeApiServer(opts: FakeKubeOptions = {}): Promise<FakeKubeApiServer> {
  const reg = new Registry();
  reg.historyLimit = opts.historyLimit ?? 10_000;
  reg.validate = validateForServer;
  reg.defaults = applyDefaults;
  const token = opts.token === null ? undefined : (opts.token ?? 'fake-token');
  const hooks: ServerHooks = {};
  for (const ns of opts.namespaces ?? ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
    reg.create(resourceFor('Namespace'), { metadata: { name: ns } });
  }
  const serviceAccounts = reg.subscribe((c) => {
    // The service account controller gives every namespace its "default" account.
    if (c.type === 'ADDED' && c.rt.kind === 'Namespace') {
      reg.create(resourceFor('ServiceAccount'), {
        metadata: { name: 'default', namespace: c.object.metadata.name },
      });
    }
  });
  for (const ns of reg.list(resourceFor('Namespace'))) {
    reg.create(resourceFor('ServiceAccount'), { metadata: { name: 'default', namespace: ns.metadata.name } });
  }
  const sw = opts.controllers ?? {};
  const controllers = new Controllers(reg, hooks, {
    switches: {
      deployments: sw.deployments ?? true,
      leaderWorkerSets: sw.leaderWorkerSets ?? true,
      scheduler: sw.scheduler ?? true,
      kubelet: sw.kubelet ?? true,
    },
    kubelet: opts.kubelet,
    probeScale: opts.probeScale ?? 0.02,
  });
  const http = new HttpFront(reg, hooks, {
    token,
    defaultFieldValidation: opts.fieldValidation ?? 'Strict',
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 1000,
  });
  const port = await http.listen();
  const url = `http://127.0.0.1:${port}`;
  const dirs: string[] = [];
  let nodeCount = 0;

  const kubeconfigYaml = (o: { namespace?: string } = {}) =>
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node refuses plain http unless the cluster skips TLS verification.
      clusters: [{ name: 'fake', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'fake', user: token === undefined ? {} : { token } }],
      contexts: [
        { name: 'fake', context: { cluster: 'fake', user: 'fake', namespace: o.namespace ?? 'default' } },
      ],
      'current-context': 'fake',
    });

  const api: FakeKubeApiServer = {
    url,
    port,
    token,
    get resourceVersion() {
      return reg.resourceVersion;
    },
    kubeconfigYaml,
    async kubeconfig(o) {
      const dir = await mkdtemp(join(tmpdir(), 'fake-kube-'));
      dirs.push(dir);
      const path = join(dir, 'kubeconfig');
      await writeFile(path, kubeconfigYaml(o), { mode: 0o600 });
      return path;
    },
    addNode(spec) {
      nodeCount++;
      const given: Record<string, string | number> = {
        cpu: '8',
        memory: '32Gi',
        pods: '110',
        'ephemeral-storage': '100Gi',
        ...spec.allocatable,
      };
      const allocatable = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, String(v)]));
      return reg.create(resourceFor('Node'), {
        metadata: {
          name: spec.name,
          labels: {
            'kubernetes.io/hostname': spec.name,
            'kubernetes.io/os': 'linux',
            'kubernetes.io/arch': 'amd64',
            ...spec.labels,
          },
        },
        spec: {
          ...(spec.taints ? { taints: spec.taints } : {}),
          ...(spec.unschedulable ? { unschedulable: true } : {}),
        },
        status: {
          capacity: allocatable,
          allocatable,
          conditions: [
            { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory' },
            { type: 'DiskPressure', status: 'False', reason: 'KubeletHasNoDiskPressure' },
            { type: 'PIDPressure', status: 'False', reason: 'KubeletHasSufficientPID' },
            {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              message: 'kubelet is posting ready status',
            },
          ],
          addresses: [
            { type: 'InternalIP', address: spec.address ?? '127.0.0.1' },
            { type: 'Hostname', address: spec.name },
          ],
          nodeInfo: {
            kubeletVersion: 'v1.33.0-fake',
            containerRuntimeVersion: 'containerd://2.0.0',
            operatingSystem: 'linux',
            architecture: 'amd64',
            osImage: 'fake',
            kernelVersion: '6.1.0',
            machineID: String(nodeCount),
          },
        },
      });
    },
    create(obj) {
      const rt = resourceByKind(obj.apiVersion, obj.kind);
      if (!rt) throw new Error(`the fake API server does not serve ${obj.kind} in ${obj.apiVersion}`);
      return reg.create(rt, obj, {
        namespace: rt.namespaced ? (obj.metadata?.namespace ?? 'default') : undefined,
        strict: true,
      });
    },
    get: (kind, namespace, name) => reg.get(resourceFor(kind), namespace, name),
    objects: (kind, namespace) => reg.list(resourceFor(kind), namespace),
    events(f = {}) {
      return reg
        .list(resourceFor('Event'), f.namespace)
        .filter(
          (e) =>
            (f.reason === undefined || e['reason'] === f.reason) &&
            (f.involvedName === undefined || e['involvedObject']?.name === f.involvedName),
        );
    },
    setPodReady(namespace, name, ready) {
      controllers.setPodReady(reg.mustGet(resourceFor('Pod'), namespace, name), ready);
    },
    setNodeReady: (name, ready) => controllers.setNodeReady(name, ready),
    crashPod: (namespace, name, exit) =>
      controllers.crashPod(reg.mustGet(resourceFor('Pod'), namespace, name), exit),
    deletePod: (namespace, name, o) =>
      deleteObject(reg, hooks, { rt: resourceFor('Pod'), namespace, name }, o),
    async waitFor(fn, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const v = fn();
        if (v) return v;
        if (Date.now() > deadline) throw new Error(`fake kube: condition not met within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    setHistoryLimit: (n) => reg.setHistoryLimit(n),
    compact: () => reg.compact(0),
    dropWatches: () => http.dropWatches(),
    silenceWatches: () => http.silenceWatches(),
    resetWatches: () => http.resetWatches(),
    failWatches: (times) => http.failWatches(times),
    admitPods(check) {
      controllers.admitPod = check;
      controllers.kick();
    },
    forbid: (verb, resource) => void http.forbidden.add(`${verb} ${resource}`),
    allow: (verb, resource) => void http.forbidden.delete(`${verb} ${resource}`),
    watchStats: http.watchStats,
    async close() {
      serviceAccounts();
      await controllers.close();
      await http.close();
      await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    },
  };
  for (const n of opts.nodes ?? []) api.addNode(n);
  return api;
}

export { apiVersionOf };
