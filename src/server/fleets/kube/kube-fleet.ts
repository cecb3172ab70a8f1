import type { Logger } from 'pino';

import type { ModelSpec } from '../../../catalog/model-spec.js';
import { LlmgwError, messageOf } from '../../../core/errors.js';
import type { KubeCluster } from '../../../kube/client.js';
import { modelNameAnnotation, productsByClass, type PodSettings } from '../../../kube/manifests.js';
import { secretName, workloadName } from '../../../kube/names.js';
import { kubeNodeView, offersOf } from '../../../kube/node-classes.js';
import { workloadTrouble, type Trouble } from '../../../kube/failures.js';
import { groupPods, replicaView } from '../../../kube/pod-views.js';
import type { Origin } from '../../../models/origin.js';
import type { ModelDownloads, NodeCache, NodeDownload, PullStarted } from '../../../protocol/cache-views.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { ReplicaView, RestartResult } from '../../../protocol/replica-views.js';
import type { RollOptions, RolloutView } from '../../../protocol/rollout-views.js';
import type { RouteReplica, RouteTable } from '../../../protocol/routes.js';
import type { Store } from '../../../store/store.js';
import type { Catalog } from '../../state/catalog.js';
import type { LeaderView } from '../../cluster/leadership.js';
import type { EventPublisher } from '../../events/event-hub.js';
import type { EngineKeys } from '../engine-keys.js';
import { modelDownloads, type Fleet, type LogOptions } from '../fleet.js';
import { Passes } from '../passes.js';
import { catalogEntry, replicaOfModel, routeReplica } from '../route-entries.js';

import { ModelKeys } from './model-keys.js';
import { podLogs } from './pod-logs.js';
import { WarningEvents } from './warning-events.js';
import { chooseProfile, hubInput, WorkloadWriter, type HubSettings, type Wanted } from './workload-writer.js';

/** Said to an agent that dials a control plane in Kubernetes mode, and to `ctl node token` there. */
export const kubernetesTakesNoAgents =
  'this control plane runs engines as Kubernetes pods (the kubernetes section of its settings) and takes no agents: ' +
  "the cluster's GPU nodes serve through the pods it schedules there; stop this agent, or remove the kubernetes " +
  'section and restart the control plane to run engines on agents';

export interface KubeFleetOptions {
  cluster: KubeCluster;
  catalog: Catalog;
  store: Store;
  keys: EngineKeys;
  logger: Logger;
  settings: () => {
    pods: PodSettings;
    llamaParallel: number;
    /** hub.endpoint and hub.token: the download init containers fetch from there, with that token. */
    hub?: HubSettings;
  };
  /** Whether this control plane writes (the leader); without it, it always does. */
  leader?: LeaderView;
  /** An autoscaled model's count (the autoscaler's), run instead of its `replicas`. */
  scaledReplicas?: (spec: ModelSpec) => number | undefined;
  events?: EventPublisher;
  /** How often it reconciles without a prompt. */
  intervalMs?: number;
}

/**
 * Replicas as native Kubernetes objects: each model of the catalog as a Deployment (a
 * LeaderWorkerSet for a multi-node profile) of its chosen profile, with the count the catalog
 * or the autoscaler wants, and its engine key in a Secret. The leader writes; every control
 * plane reads pods and nodes from its informers, so the replicas, the routes and the nodes are
 * what the cluster says now. The scheduler places, the kubelet restarts: llmgw only declares.
 */
export class KubeFleet implements Fleet {
  readonly #o: KubeFleetOptions;
  readonly #keys: ModelKeys;
  readonly #writer: WorkloadWriter;
  readonly #passes: Passes;
  readonly #events: WarningEvents;
  /** Why a model's objects could not be written, by model. */
  readonly #problems = new Map<string, string>();
  #wanted = new Map<string, Wanted>();
  #timer: NodeJS.Timeout | undefined;

  constructor(o: KubeFleetOptions) {
    this.#o = o;
    this.#keys = new ModelKeys(o);
    this.#writer = new WorkloadWriter({ cluster: o.cluster, keys: this.#keys, logger: o.logger });
    this.#events = new WarningEvents({
      cluster: o.cluster,
      logger: o.logger,
      maxAgeMs: o.intervalMs ?? 10_000,
    });
    this.#passes = new Passes({
      pass: () => this.#pass(),
      failed: (e) => o.logger.error({ err: messageOf(e) }, 'Kubernetes reconcile failed'),
    });
  }

  get leads(): boolean {
    return this.#o.leader?.leads() ?? true;
  }

  async start(): Promise<void> {
    this.#o.cluster.onChange(() => {
      this.#o.events?.publish('replicas');
      this.#o.events?.publish('nodes');
    });
    this.#o.leader?.onChange(() => this.poke());
    await this.reconcile();
    let beats = 0;
    this.#timer = setInterval(() => {
      // Now and then the Secrets are read again: one deleted by hand is made again.
      if (++beats % 6 === 0) this.#writer.recheckSecrets();
      this.poke();
    }, this.#o.intervalMs ?? 10_000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#passes.stop();
    await this.#o.cluster.stop();
  }

  poke(): void {
    this.#passes.poke();
  }

  async reconcile(): Promise<void> {
    await this.settled();
    this.poke();
    await this.settled();
  }

  settled(): Promise<void> {
    return this.#passes.settled();
  }

  /** One pass: the objects the catalog wants written, those it no longer wants deleted (leader only). */
  async #pass(): Promise<void> {
    const specs = await this.#o.catalog.specs();
    const origins = await this.#o.catalog.origins();
    const { pods: podSettings, llamaParallel, hub: hubSettings } = this.#o.settings();
    const cluster = this.#o.cluster;
    const hub = this.leads ? await this.#writer.hub(podSettings.namespace, hubSettings) : undefined;
    const nodes = cluster.nodes();
    const products = productsByClass(nodes.map((n) => ({ labels: n.metadata?.labels })));
    const offered = new Set(nodes.flatMap((n) => offersOf(n).map((o) => o.class)));
    const workloads = cluster.workloads();
    const existing = new Map(workloads.map((w) => [w.metadata?.name ?? '', w]));
    const wanted = new Map<string, Wanted>();
    const keep = new Set<string>();
    for (const spec of specs) {
      const profile = chooseProfile(spec, offered, existing);
      const replicas = this.#o.scaledReplicas?.(spec) ?? spec.replicas;
      const w: Wanted = { spec, profile, replicas };
      wanted.set(spec.name, w);
      const name = workloadName(spec.name, profile);
      // By kind too: a profile that came to span nodes leaves its Deployment for a LeaderWorkerSet.
      const kind = profile.nodes > 1 ? 'LeaderWorkerSet' : 'Deployment';
      keep.add(`${kind}/${name}`);
      if (!this.leads) continue;
      try {
        const current = existing.get(name);
        await this.#writer.write(w, current?.kind === kind ? current : undefined, {
          origin: origins.get(spec.name),
          pods: podSettings,
          llamaParallel,
          products,
          hub,
        });
        this.#problems.delete(spec.name);
      } catch (e) {
        const message = messageOf(e);
        if (this.#problems.get(spec.name) !== message)
          this.#o.logger.warn({ model: spec.name, err: message }, 'could not write the model to Kubernetes');
        this.#problems.set(spec.name, message);
        this.#writer.recheckSecrets(spec.name);
      }
    }
    this.#wanted = wanted;
    await this.#readEvents();
    if (!this.leads) return;
    const models = new Set(specs.map((s) => s.name));
    for (const w of workloads) {
      const name = w.metadata?.name ?? '';
      const kind = w.kind === 'LeaderWorkerSet' ? 'LeaderWorkerSet' : 'Deployment';
      if (keep.has(`${kind}/${name}`)) continue;
      this.#o.logger.info({ object: `${kind}/${name}` }, 'deleting what the catalog no longer wants');
      await cluster.remove(kind, name);
      const model = w.metadata?.annotations?.[modelNameAnnotation];
      if (model !== undefined && !models.has(model)) {
        await cluster.remove('Secret', secretName(model));
        this.#keys.forget(model);
        this.#writer.recheckSecrets(model);
      }
    }
  }

  /** The namespace's Warning events while a replica is missing or not ready (why, in the cluster's words). */
  async #readEvents(): Promise<void> {
    const views = this.#views();
    const short = [...this.#wanted.values()].some(
      (w) => views.filter((v) => v.model === w.spec.name && v.retiring !== true).length < w.replicas,
    );
    if (!short && views.every((v) => v.state === 'ready')) {
      this.#events.clear();
      return;
    }
    if (await this.#events.refresh()) this.#o.events?.publish('replicas');
  }

  /** Why a wanted model's workload has fewer pods than it wants, as its conditions and events say. */
  #trouble(w: Wanted): Trouble | undefined {
    const name = workloadName(w.spec.name, w.profile);
    const kind = w.profile.nodes > 1 ? 'LeaderWorkerSet' : 'Deployment';
    const workload = this.#o.cluster.workloads().find((x) => x.kind === kind && x.metadata?.name === name);
    return workload === undefined ? undefined : workloadTrouble(workload, this.#events.list, Date.now());
  }

  // Views

  #views(): ReplicaView[] {
    const specs = new Map([...this.#wanted.values()].map((w) => [w.spec.name, w.spec]));
    const port = this.#o.settings().pods.engine_port;
    const events = this.#events.list;
    const now = Date.now();
    return groupPods(this.#o.cluster.pods()).map((g) => {
      const view = replicaView({ ...g, engine: null, port, events, now });
      const spec = specs.get(view.model);
      const profile = spec?.profiles.find((p) => p.name === view.profile) ?? spec?.profiles[0];
      return { ...view, engine: profile?.engine ?? null };
    });
  }

  replicas(model?: string): ReplicaView[] {
    const views = this.#views().filter((v) => model === undefined || v.model === model);
    // Replicas the Deployment has not made pods for yet (or could not be written): pending, with why.
    for (const w of this.#wanted.values()) {
      if (model !== undefined && w.spec.name !== model) continue;
      const have = views.filter((v) => v.model === w.spec.name && v.retiring !== true).length;
      const problem = this.#problems.get(w.spec.name);
      const trouble = have < w.replicas && problem === undefined ? this.#trouble(w) : undefined;
      for (let i = have; i < w.replicas; i++) {
        views.push({
          id: null,
          model: w.spec.name,
          profile: w.profile.name,
          engine: w.profile.engine,
          state: trouble?.state ?? 'pending',
          reason: problem ?? trouble?.reason ?? 'waiting for Kubernetes to make its pod',
          restarts: 0,
          shards: [],
        });
      }
    }
    return views;
  }

  replica(id: string): ReplicaView {
    const v = this.#views().find((x) => x.id === id);
    if (v === undefined) unknownReplica(id);
    return v;
  }

  async restart(id: string, inPlace: boolean, actor: string): Promise<RestartResult> {
    const v = this.replica(id);
    if (inPlace) {
      await this.#o.cluster.deletePod(id);
      return {
        replica: id,
        mode: 'in-place',
        message: `pod ${id} deleted by ${actor}: its ${v.shards.length > 1 ? 'LeaderWorkerSet' : 'Deployment'} makes a new one in its place`,
      };
    }
    if (v.profile === null)
      throw new LlmgwError(
        'conflict',
        `replica ${id} has no profile label: delete its pod instead (--in-place)`,
      );
    // kubectl rollout restart's way: a new template annotation rolls every pod of the model's profile.
    const profile = this.#wanted.get(v.model)?.spec.profiles.find((p) => p.name === v.profile);
    const name = workloadName(v.model, profile ?? { name: v.profile, nodes: v.shards.length });
    this.#writer.restart(name);
    if (!this.leads)
      throw new LlmgwError(
        'unavailable',
        'this control plane does not lead: ask the leader (llmgw ctl status names it)',
      );
    await this.reconcile();
    const problem = this.#problems.get(v.model);
    if (problem !== undefined) throw new LlmgwError('unavailable', problem);
    return {
      replica: id,
      mode: 'surge',
      message: `${name} rolls its pods one at a time (as kubectl rollout restart does): pod ${id} stops once its successor is scheduled`,
    };
  }

  /**
   * Nothing to check before: each profile is its own Deployment, so a changed profile's pods
   * stay on it, and one the cluster has no room for waits as Pending with the scheduler's why.
   */
  checkRoll(model: string): Promise<number> {
    // The Deployment's rolling update replaces every pod of the changed template.
    return Promise.resolve(this.replicas(model).filter((r) => r.id !== null).length);
  }

  /** Kubernetes rolls a changed pod template itself (the Deployment's rolling update): always a surge. */
  async rollModel(
    model: string,
    _next: ModelSpec,
    o: RollOptions,
    write: () => Promise<void>,
  ): Promise<RolloutView> {
    const started_at = new Date().toISOString();
    await write();
    await this.reconcile();
    const total = this.replicas(model).length;
    return {
      model,
      change: o.change,
      mode: 'surge',
      by: o.actor,
      started_at,
      state: 'rolling',
      replaced: 0,
      total,
    };
  }

  /** The workload the next pass would write for `spec`, beside what the cluster runs now. */
  manifests(spec: ModelSpec, origin: Origin | undefined): Promise<Record<string, unknown>[]> {
    const { pods, llamaParallel, hub } = this.#o.settings();
    const nodes = this.#o.cluster.nodes();
    const existing = new Map(this.#o.cluster.workloads().map((w) => [w.metadata?.name ?? '', w]));
    const offered = new Set(nodes.flatMap((n) => offersOf(n).map((o) => o.class)));
    const profile = chooseProfile(spec, offered, existing);
    const kind = profile.nodes > 1 ? 'LeaderWorkerSet' : 'Deployment';
    const current = existing.get(workloadName(spec.name, profile));
    const workload = this.#writer.compose(
      { spec, profile, replicas: this.#o.scaledReplicas?.(spec) ?? spec.replicas },
      current?.kind === kind ? current : undefined,
      {
        origin,
        pods,
        llamaParallel,
        products: productsByClass(nodes.map((n) => ({ labels: n.metadata?.labels }))),
        hub: hubInput(hub),
      },
    );
    return Promise.resolve([JSON.parse(JSON.stringify(workload)) as Record<string, unknown>]);
  }

  /** None is kept: the Deployment's rollout status is Kubernetes'. */
  rollout(): Promise<RolloutView | undefined> {
    return Promise.resolve(undefined);
  }

  async routeTable(): Promise<RouteTable> {
    const replicas: RouteReplica[] = [];
    const views = this.#views();
    const specs = await this.#o.catalog.specs();
    const byName = new Map(specs.map((s) => [s.name, s]));
    const llamaParallel = this.#o.settings().llamaParallel;
    for (const v of views) {
      const spec = byName.get(v.model);
      const profile = spec?.profiles.find((p) => p.name === v.profile);
      if (spec === undefined || profile === undefined || v.endpoint === undefined) continue;
      if (v.state !== 'ready' || v.retiring === true || v.id === null) continue;
      replicas.push(
        routeReplica({
          id: v.id,
          model: spec.name,
          profile,
          endpoint: v.endpoint,
          apiKey: await this.#keys.keyOf(spec.name),
          llamaParallel,
        }),
      );
    }
    const models = specs.map((m) => {
      const wanted = this.#o.scaledReplicas?.(m) ?? m.replicas;
      const mine = views.filter((v) => v.model === m.name && v.id !== null);
      const pendingCount = Math.max(0, wanted - mine.length);
      const w = this.#wanted.get(m.name);
      const problem =
        this.#problems.get(m.name) ??
        (pendingCount === 0 || w === undefined ? undefined : this.#trouble(w)?.reason);
      return catalogEntry(m, {
        wanted,
        replicas: mine.map(replicaOfModel),
        pending:
          problem === undefined || pendingCount === 0 ? undefined : { count: pendingCount, reason: problem },
      });
    });
    return { replicas, models };
  }

  logs(id: string, options: LogOptions): Promise<void> {
    return podLogs(this.#o.cluster, id, {
      ...options,
      namespace: this.#o.settings().pods.namespace,
      unknown: () => unknownReplica(id),
    });
  }

  // What only agents do: refused, or nothing to tell.

  pull(): PullStarted {
    throw new LlmgwError('not_implemented', agentsOnly('ctl model pull'));
  }

  downloads(model: string, origin: Origin): ModelDownloads {
    return modelDownloads(model, origin);
  }

  activeDownloads(): NodeDownload[] {
    return [];
  }

  caches(): Promise<NodeCache[]> {
    return Promise.reject(new LlmgwError('not_implemented', agentsOnly("ctl cache of nodes' model files")));
  }

  /** No agent keeps files here: a PVC is the operator's, an emptyDir goes with its pod. */
  purge(): Promise<string[]> {
    return Promise.resolve([]);
  }

  /** The nodes as llmgw shows them, read-only (the node registry's in Kubernetes mode). */
  nodeViews(): NodeView[] {
    const pods = this.#o.cluster.pods();
    return this.#o.cluster
      .nodes()
      .map((n) => kubeNodeView(n, pods))
      .sort((a, b) => a.name.localeCompare(b.name));
  }
}

function unknownReplica(id: string): never {
  throw new LlmgwError(
    'not_found',
    `no replica is named "${id}" (llmgw ctl replicas lists them; in Kubernetes a replica is its pod)`,
  );
}

/** Why an operation for agents' nodes is refused here, with what to do instead. */
function agentsOnly(operation: string): string {
  return `${operation} is for nodes with an llmgw agent, and this control plane runs in Kubernetes mode (kubernetes: in its settings): the kubelet runs the engines, and model files come from kubernetes.models.pvc or its downloader init container`;
}
