import type {
  KubeConfig,
  KubernetesObject,
  V1Deployment,
  V1Node,
  V1Pod,
  V1Secret,
} from '@kubernetes/client-node';

import type { RequestOptions as HttpsRequestOptions } from 'node:https';

import { LlmgwError } from '../core/errors.js';

import { apiStatus, kubeError } from './errors.js';
import type { KEvent } from './failures.js';
import { defaultWatchSettings, startInformer, type ListResult, type WatchSettings } from './informer.js';
import type { KDeployment, KNode, KPod, KSecret } from './kube-types.js';
import { lwsApiVersion, type LeaderWorkerSet, type Workload } from './manifests.js';
import { managedBy } from './names.js';
import type { WatchLogger } from './watch-health.js';

/**
 * The Kubernetes API as llmgw uses it: informers (informer.ts: list, then watch with bookmarks;
 * list and watch again after any failure, logged once) over the nodes, llmgw's pods, Deployments and
 * LeaderWorkerSets of its namespace; and create-or-replace and delete of the objects it owns.
 * @kubernetes/client-node is imported here only, lazily: llmgw's start stays fast off Kubernetes.
 */

export interface KubeConnection {
  namespace: string;
  kubeconfig: string;
  context: string;
}

/** What the control plane's Kubernetes mode needs of a cluster (KubeFleet reads and writes through it). */
export interface KubeCluster {
  nodes(): readonly KNode[];
  pods(): readonly KPod[];
  workloads(): readonly Workload[];
  /** Whether the LeaderWorkerSet CRD answers (multi-node profiles need it). */
  readonly leaderWorkerSets: boolean;
  /** Something the informers watch changed. */
  onChange(listener: () => void): void;
  /** Creates the object, or replaces the one there (kept: its resourceVersion). */
  apply(object: Workload | KSecret): Promise<void>;
  remove(kind: 'Deployment' | 'LeaderWorkerSet' | 'Secret', name: string): Promise<void>;
  readSecret(name: string): Promise<KSecret | undefined>;
  deletePod(name: string): Promise<void>;
  /**
   * The namespace's Warning events (one list, fieldSelector type=Warning): why pods are not made
   * or do not start. KubeFleet reads them only while a replica is not ready, and keeps them a while.
   */
  warningEvents(): Promise<KEvent[]>;
  /**
   * A container's log (GET .../pods/NAME/log): its last `tail` lines, then with `follow` each
   * new chunk until the container ends or `signal` aborts. `onText` is called once the API
   * answers (with '' when there is nothing yet). Refusals come in words (LlmgwError).
   */
  podLog(pod: string, o: PodLogOptions): Promise<void>;
  stop(): Promise<void>;
}

export interface PodLogOptions {
  container: string;
  tail: number;
  follow: boolean;
  signal: AbortSignal;
  onText: (text: string) => void;
}

/** Plain data where the library's typed APIs declare classes: it serialises either the same way. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- a typed cast, on purpose
export function asApi<T>(o: object): T {
  return o as T;
}

const lws = { group: 'leaderworkerset.x-k8s.io', version: 'v1', plural: 'leaderworkersets' };

export interface ConnectOptions {
  /** Where watch failures (and their recovery) are told, once each. */
  log: WatchLogger;
  /** Tests shorten these. */
  watch?: Partial<WatchSettings>;
}

/** The KubeConfig: kubernetes.kubeconfig (and context), else in-cluster, else KUBECONFIG / ~/.kube/config. */
export async function loadConfig(c: KubeConnection): Promise<KubeConfig> {
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  if (c.kubeconfig !== '') kc.loadFromFile(c.kubeconfig);
  else if (process.env['KUBERNETES_SERVICE_HOST'] !== undefined) kc.loadFromCluster();
  else kc.loadFromDefault();
  if (c.context !== '') {
    if (!kc.getContexts().some((x) => x.name === c.context)) {
      throw new LlmgwError(
        'invalid_argument',
        `kubernetes.context "${c.context}" is not a context of ${c.kubeconfig === '' ? 'the kubeconfig' : c.kubeconfig} (it has: ${
          kc
            .getContexts()
            .map((x) => x.name)
            .join(', ') || 'none'
        })`,
      );
    }
    kc.setCurrentContext(c.context);
  }
  if (kc.getCurrentCluster() === null) {
    throw new LlmgwError(
      'invalid_argument',
      'no Kubernetes cluster to talk to: set kubernetes.kubeconfig, or run llmgw in the cluster with a service account (the Helm chart does)',
    );
  }
  return kc;
}

/** Connects, and waits for each informer's first list. Throws LlmgwError when the API refuses. */
export async function connectCluster(c: KubeConnection, o: ConnectOptions): Promise<KubeCluster> {
  const k8s = await import('@kubernetes/client-node');
  const kc = await loadConfig(c);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const ns = c.namespace;
  const selector = `${managedBy.key}=${managedBy.value}`;
  const listeners: (() => void)[] = [];
  const changed = () => {
    for (const l of listeners) l();
  };
  const settings = { ...defaultWatchSettings, ...o.watch };

  /** An informer started and kept running (informer.ts). */
  function watchList<T extends KubernetesObject>(
    path: string,
    list: () => Promise<ListResult<T>>,
    action: Parameters<typeof kubeError>[1],
    labelSelector?: string,
  ) {
    return startInformer<T>({
      kc,
      path,
      labelSelector,
      resource: action.resource,
      list: async () => {
        try {
          return await list();
        } catch (e) {
          throw kubeError(e, action);
        }
      },
      settings,
      log: o.log,
      onChange: changed,
    });
  }

  // An informer that cannot list says so only through its error event: each list is tried once
  // first, so that a refusal (credentials, RBAC, a missing namespace) stops the start in words.
  const preflight = async (list: () => Promise<unknown>, action: Parameters<typeof kubeError>[1]) => {
    try {
      await list();
    } catch (e) {
      throw kubeError(e, action);
    }
  };
  await preflight(() => core.listNode({ limit: 1 }), { verb: 'list', resource: 'nodes' });
  await preflight(() => core.listNamespacedPod({ namespace: ns, labelSelector: selector, limit: 1 }), {
    verb: 'list',
    resource: 'pods',
    namespace: ns,
  });
  await preflight(() => apps.listNamespacedDeployment({ namespace: ns, labelSelector: selector, limit: 1 }), {
    verb: 'list',
    resource: 'deployments.apps',
    namespace: ns,
  });
  const nodes = await watchList<V1Node>('/api/v1/nodes', () => core.listNode({}), {
    verb: 'list',
    resource: 'nodes',
  });
  const pods = await watchList<V1Pod>(
    `/api/v1/namespaces/${ns}/pods`,
    () => core.listNamespacedPod({ namespace: ns, labelSelector: selector }),
    { verb: 'list', resource: 'pods', namespace: ns },
    selector,
  );
  const deployments = await watchList<KDeployment>(
    `/apis/apps/v1/namespaces/${ns}/deployments`,
    () => apps.listNamespacedDeployment({ namespace: ns, labelSelector: selector }),
    { verb: 'list', resource: 'deployments.apps', namespace: ns },
    selector,
  );
  // The CRD may be absent: single-node profiles run without it, multi-node ones are refused with a message.
  const lwsAction = {
    verb: 'list' as const,
    resource: 'leaderworkersets.leaderworkerset.x-k8s.io',
    namespace: ns,
  };
  const listLws = async () =>
    (await custom.listNamespacedCustomObject({
      ...lws,
      namespace: ns,
      labelSelector: selector,
    })) as ListResult<LeaderWorkerSet & KubernetesObject>;
  let sets: { list(): readonly LeaderWorkerSet[]; stop(): void } | undefined;
  try {
    await listLws();
    sets = await watchList<LeaderWorkerSet & KubernetesObject>(
      `/apis/${lws.group}/${lws.version}/namespaces/${ns}/${lws.plural}`,
      listLws,
      lwsAction,
      selector,
    );
  } catch (e) {
    if (apiStatus(e)?.code !== 404) throw kubeError(e, lwsAction);
  }

  const noLws = () =>
    new LlmgwError(
      'unavailable',
      'the cluster has no LeaderWorkerSet CRD (leaderworkerset.x-k8s.io/v1), which multi-node profiles run as: install it (docs/kubernetes.md, "Multi-node profiles"), then restart llmgw',
    );

  return {
    nodes: () => nodes.list(),
    pods: () => pods.list(),
    // Items of a list carry no kind (only watch events do): each informer's are stamped with theirs.
    workloads: (): Workload[] => [
      ...deployments.list().map((d): Workload => ({ ...d, apiVersion: 'apps/v1', kind: 'Deployment' })),
      ...(sets?.list() ?? []).map((l): Workload => ({
        ...l,
        apiVersion: lwsApiVersion,
        kind: 'LeaderWorkerSet',
      })),
    ],
    leaderWorkerSets: sets !== undefined,
    onChange: (l) => listeners.push(l),

    async apply(object) {
      const name = object.metadata?.name ?? '';
      const kind = object.kind ?? '';
      const act = (verb: 'get' | 'create' | 'update') => ({
        verb,
        resource:
          kind === 'Secret' ? 'secrets' : kind === 'Deployment' ? 'deployments.apps' : lwsAction.resource,
        namespace: ns,
        name,
      });
      let existing: KubernetesObject | undefined;
      try {
        existing =
          kind === 'Secret'
            ? await core.readNamespacedSecret({ name, namespace: ns })
            : kind === 'Deployment'
              ? await apps.readNamespacedDeployment({ name, namespace: ns })
              : ((await custom.getNamespacedCustomObject({
                  ...lws,
                  namespace: ns,
                  name,
                })) as KubernetesObject);
      } catch (e) {
        if (apiStatus(e)?.code !== 404) throw kubeError(e, act('get'));
        if (kind === 'LeaderWorkerSet' && sets === undefined) throw noLws();
      }
      try {
        if (existing === undefined) {
          if (kind === 'Secret')
            await core.createNamespacedSecret({ namespace: ns, body: asApi<V1Secret>(object) });
          else if (kind === 'Deployment')
            await apps.createNamespacedDeployment({ namespace: ns, body: asApi<V1Deployment>(object) });
          else await custom.createNamespacedCustomObject({ ...lws, namespace: ns, body: object });
          return;
        }
        const body = {
          ...object,
          metadata: { ...object.metadata, resourceVersion: existing.metadata?.resourceVersion },
        };
        if (kind === 'Secret')
          await core.replaceNamespacedSecret({ name, namespace: ns, body: asApi<V1Secret>(body) });
        else if (kind === 'Deployment')
          await apps.replaceNamespacedDeployment({ name, namespace: ns, body: asApi<V1Deployment>(body) });
        else await custom.replaceNamespacedCustomObject({ ...lws, namespace: ns, name, body });
      } catch (e) {
        throw kubeError(e, act(existing === undefined ? 'create' : 'update'));
      }
    },

    async remove(kind, name) {
      const resource =
        kind === 'Secret' ? 'secrets' : kind === 'Deployment' ? 'deployments.apps' : lwsAction.resource;
      try {
        if (kind === 'Secret') await core.deleteNamespacedSecret({ name, namespace: ns });
        else if (kind === 'Deployment')
          await apps.deleteNamespacedDeployment({ name, namespace: ns, propagationPolicy: 'Background' });
        else
          await custom.deleteNamespacedCustomObject({
            ...lws,
            namespace: ns,
            name,
            propagationPolicy: 'Background',
          });
      } catch (e) {
        if (apiStatus(e)?.code === 404) return;
        throw kubeError(e, { verb: 'delete', resource, namespace: ns, name });
      }
    },

    async readSecret(name) {
      try {
        return await core.readNamespacedSecret({ name, namespace: ns });
      } catch (e) {
        if (apiStatus(e)?.code === 404) return undefined;
        throw kubeError(e, { verb: 'get', resource: 'secrets', namespace: ns, name });
      }
    },

    async deletePod(name) {
      try {
        await core.deleteNamespacedPod({ name, namespace: ns });
      } catch (e) {
        throw kubeError(e, { verb: 'delete', resource: 'pods', namespace: ns, name });
      }
    },

    async warningEvents() {
      try {
        return (await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'type=Warning' })).items;
      } catch (e) {
        throw kubeError(e, { verb: 'list', resource: 'events', namespace: ns });
      }
    },

    async podLog(pod, o) {
      const refused = (e: unknown) => podLogError(e, ns, pod);
      if (!o.follow) {
        let text: string;
        try {
          text = await core.readNamespacedPodLog({
            name: pod,
            namespace: ns,
            container: o.container,
            tailLines: o.tail,
          });
        } catch (e) {
          throw refused(e);
        }
        o.onText(text);
        return;
      }
      await followLog(kc, { ns, pod, ...o }, refused);
    },

    stop() {
      for (const i of [nodes, pods, deployments, sets]) i?.stop();
      return Promise.resolve();
    },
  };
}

/**
 * The log endpoint's refusals in words: a container that has not started (400), a pod gone
 * meanwhile (404); the others (403: the Role lacks pods/log) as every API call's.
 */
function podLogError(e: unknown, ns: string, pod: string): LlmgwError {
  const status = apiStatus(e);
  if (status?.code === 400)
    return new LlmgwError(
      'conflict',
      `pod ${pod} has no log to show: the Kubernetes API says: ${status.message}`,
      {
        cause: e,
      },
    );
  if (status?.code === 404)
    return new LlmgwError(
      'not_found',
      `pod ${pod} is gone (deleted meanwhile): llmgw ctl replicas lists the replicas now`,
      { cause: e },
    );
  return kubeError(e, { verb: 'get', resource: 'pods/log', namespace: ns, name: pod });
}

/**
 * `GET .../log?follow=true`, streamed. Not client-node's Log class: it drops tailLines=0 (so
 * `--tail 0 -f` would print the whole log), keeps no Status body of a refusal (its words), and
 * says nothing when the stream breaks. The request carries the kubeconfig's credentials and
 * TLS settings as every call of the library does (applyToHTTPSOptions).
 */
async function followLog(
  kc: KubeConfig,
  o: PodLogOptions & { ns: string; pod: string },
  refused: (e: unknown) => LlmgwError,
): Promise<void> {
  const server = kc.getCurrentCluster()?.server ?? '';
  const url = new URL(
    `${server.replace(/\/+$/, '')}/api/v1/namespaces/${encodeURIComponent(o.ns)}/pods/${encodeURIComponent(o.pod)}/log`,
  );
  url.searchParams.set('container', o.container);
  url.searchParams.set('tailLines', String(o.tail));
  url.searchParams.set('follow', 'true');
  const options: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  const { request } = url.protocol === 'http:' ? await import('node:http') : await import('node:https');
  if (o.signal.aborted) return;
  return new Promise<void>((resolve, reject) => {
    const req = request(url, { ...options, method: 'GET', signal: o.signal }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (c: string) => (body += c));
        res.on('end', () => reject(refused({ code: res.statusCode ?? 0, body })));
        res.on('error', () => reject(refused({ code: res.statusCode ?? 0, body })));
        return;
      }
      o.onText('');
      res.on('data', (c: string) => o.onText(c));
      res.on('end', () => resolve());
      res.on('error', (e) => (o.signal.aborted ? resolve() : reject(refused(e))));
    });
    req.on('error', (e) => (o.signal.aborted ? resolve() : reject(refused(e))));
    req.end();
  });
}
