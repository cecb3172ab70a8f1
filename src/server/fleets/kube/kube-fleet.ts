import type { Logger } from 'pino';

import { isCpuProfile, type ModelSpec, type ProfileSpec } from '../../../catalog/model-spec.js';
import { LlmgwError, messageOf } from '../../../core/errors.js';
import { generateSecret } from '../../../core/secrets.js';
import type { KubeCluster } from '../../../kube/client.js';
import {
  engineContainer,
  engineKeySecret,
  engineKeySecretKey,
  hubTokenSecret,
  hubTokenSecretKey,
  hubTokenSecretName,
  keepingPlacedPods,
  modelNameAnnotation,
  productsByClass,
  templatesOf,
  workloadLabels,
  type PodSettings,
  type Workload,
  type WorkloadInput,
} from '../../../kube/manifests.js';
import { restartedAtAnnotation, secretName, specHashAnnotation, workloadName } from '../../../kube/names.js';
import { kubeNodeView, offersOf } from '../../../kube/node-classes.js';
import { groupPods, podState, replicaView } from '../../../kube/pod-views.js';
import type { Origin } from '../../../models/origin.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { ReplicaView, RestartResult } from '../../../protocol/replica-views.js';
import type { RouteReplica, RouteTable } from '../../../protocol/routes.js';
import type { Store } from '../../../store/store.js';
import type { Catalog } from '../../catalog.js';
import type { LeaderView } from '../../cluster/leadership.js';
import type { EventPublisher } from '../../events/event-hub.js';
import type { EngineKeys } from '../engine-keys.js';
import { catalogEntry, replicaOfModel, routeReplica } from '../route-entries.js';

import type { FleetDelegate } from './delegate.js';

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
    hub?: { endpoint?: string | undefined; token?: string | undefined };
  };
  /** Whether this control plane writes (the leader); without it, it always does. */
  leader?: LeaderView;
  /** An autoscaled model's count (the autoscaler's), run instead of its `replicas`. */
  scaledReplicas?: (spec: ModelSpec) => number | undefined;
  events?: EventPublisher;
  /** How often it reconciles without a prompt. */
  intervalMs?: number;
}

/** The chosen profile of a model, and why none could be written when one could not. */
interface Wanted {
  spec: ModelSpec;
  profile: ProfileSpec;
  replicas: number;
  problem?: string;
}

const keyPrefix = 'kube/engine-key/';

/**
 * Replicas as native Kubernetes objects: each model of the catalog as a Deployment (a
 * LeaderWorkerSet for a multi-node profile) of its chosen profile, with the count the catalog
 * or the autoscaler wants, and its engine key in a Secret. The leader writes; every control
 * plane reads pods and nodes from its informers, so the replicas, the routes and the nodes are
 * what the cluster says now. The scheduler places, the kubelet restarts: llmgw only declares.
 */
export class KubeFleet implements FleetDelegate {
  readonly #o: KubeFleetOptions;
  readonly #keys = new Map<string, string>();
  /** Why a model's objects could not be written, by model. */
  readonly #problems = new Map<string, string>();
  /** Rolling restarts asked for, by workload name: the template annotation to write. */
  readonly #restarts = new Map<string, string>();
  /** Models whose Secret holds their key, as last read or written here. */
  readonly #secretsOk = new Set<string>();
  /** hub.token as last written to its Secret (undefined: none written, or deleted). */
  #hubToken: string | undefined;
  #wanted = new Map<string, Wanted>();
  #running: Promise<void> | undefined;
  #again = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(o: KubeFleetOptions) {
    this.#o = o;
  }

  get #leads(): boolean {
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
      if (++beats % 6 === 0) this.#secretsOk.clear();
      this.poke();
    }, this.#o.intervalMs ?? 10_000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#running;
    await this.#o.cluster.stop();
  }

  poke(): void {
    if (this.#stopped) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#running = this.#pass()
      .catch((e: unknown) => this.#o.logger.error({ err: messageOf(e) }, 'Kubernetes reconcile failed'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  async reconcile(): Promise<void> {
    await this.settled();
    this.poke();
    await this.settled();
  }

  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** One pass: the objects the catalog wants written, those it no longer wants deleted (leader only). */
  async #pass(): Promise<void> {
    const specs = await this.#o.catalog.specs();
    const origins = await this.#o.catalog.origins();
    const { pods: podSettings, llamaParallel, hub: hubSettings } = this.#o.settings();
    const cluster = this.#o.cluster;
    const hub = this.#leads ? await this.#hub(podSettings.namespace, hubSettings) : undefined;
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
      const name = workloadName(spec.name, profile.name);
      // By kind too: a profile that came to span nodes leaves its Deployment for a LeaderWorkerSet.
      const kind = profile.nodes > 1 ? 'LeaderWorkerSet' : 'Deployment';
      keep.add(`${kind}/${name}`);
      if (!this.#leads) continue;
      try {
        const current = existing.get(name);
        await this.#write(w, current?.kind === kind ? current : undefined, {
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
        this.#secretsOk.delete(spec.name);
      }
    }
    this.#wanted = wanted;
    if (!this.#leads) return;
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
        this.#keys.delete(model);
        this.#secretsOk.delete(model);
      }
    }
  }

  /**
   * Where the download init containers fetch from: hub.endpoint, and hub.token kept in a
   * Secret of llmgw's (written when it changes, deleted when unset) that the pods read.
   */
  async #hub(
    namespace: string,
    settings: { endpoint?: string | undefined; token?: string | undefined } | undefined,
  ): Promise<WorkloadInput['hub']> {
    const token = settings?.token;
    if (token !== this.#hubToken) {
      if (token === undefined) await this.#o.cluster.remove('Secret', hubTokenSecretName);
      else await this.#o.cluster.apply(hubTokenSecret(namespace, token));
      this.#hubToken = token;
    }
    return {
      endpoint: settings?.endpoint,
      tokenSecret: token === undefined ? undefined : { name: hubTokenSecretName, key: hubTokenSecretKey },
    };
  }

  async #write(
    w: Wanted,
    current: Workload | undefined,
    c: {
      origin: Origin | undefined;
      pods: PodSettings;
      llamaParallel: number;
      products: ReturnType<typeof productsByClass>;
      hub: WorkloadInput['hub'];
    },
  ): Promise<void> {
    const { spec, profile } = w;
    const { origin, pods, llamaParallel, products } = c;
    if (profile.nodes > 1 && !this.#o.cluster.leaderWorkerSets) {
      throw new LlmgwError(
        'unavailable',
        `profile "${profile.name}" spans ${profile.nodes} nodes, which runs as a LeaderWorkerSet, and the cluster has no LeaderWorkerSet CRD: install it (docs/kubernetes.md, "Multi-node profiles") and restart llmgw`,
      );
    }
    const workload = keepingPlacedPods(
      {
        model: spec,
        profile,
        origin,
        replicas: w.replicas,
        settings: pods,
        llamaParallel,
        products,
        hub: c.hub,
      },
      current,
      this.#waitsForNode(spec.name, profile.name),
    );
    const name = workload.metadata?.name ?? '';
    // A rolling restart asked for here, or one made before (by llmgw or kubectl rollout restart), is kept.
    const seen = templateAnnotations(current)?.[restartedAtAnnotation];
    // Ours is kept until the informer shows it written; from then on the object's (a later kubectl rollout restart's) wins.
    if (this.#restarts.get(name) === seen) this.#restarts.delete(name);
    const restartedAt = this.#restarts.get(name) ?? seen;
    if (restartedAt !== undefined) {
      for (const t of templatesOf(workload)) {
        t.metadata = {
          ...t.metadata,
          annotations: { ...t.metadata?.annotations, [restartedAtAnnotation]: restartedAt },
        };
      }
    }
    // The Secret is read once a minute per model (and after a failed pass): not on every pass.
    if (!this.#secretsOk.has(spec.name)) {
      const key = await this.#keyOf(spec.name);
      const secret = await this.#o.cluster.readSecret(secretName(spec.name));
      const stored = secret?.data?.[engineKeySecretKey];
      if (stored === undefined || Buffer.from(stored, 'base64').toString('utf8') !== key)
        await this.#o.cluster.apply(engineKeySecret(spec.name, pods.namespace, key));
      this.#secretsOk.add(spec.name);
    }
    const same =
      current !== undefined &&
      current.kind === workload.kind &&
      current.metadata?.annotations?.[specHashAnnotation] ===
        workload.metadata?.annotations?.[specHashAnnotation] &&
      current.spec?.replicas === w.replicas &&
      templateAnnotations(current)?.[restartedAtAnnotation] === restartedAt;
    if (same) return;
    this.#o.logger.info(
      {
        object: `${workload.kind}/${name}`,
        replicas: w.replicas,
        hash: workload.metadata?.annotations?.[specHashAnnotation],
      },
      current === undefined ? 'creating' : 'updating',
    );
    await this.#o.cluster.apply(workload);
  }

  /** Whether a pod of this model's profile waits for the scheduler to find it a node. */
  #waitsForNode(model: string, profile: string): boolean {
    const labels = workloadLabels(model, profile);
    return this.#o.cluster
      .pods()
      .some(
        (p) =>
          Object.entries(labels).every(([k, v]) => p.metadata?.labels?.[k] === v) &&
          p.metadata?.deletionTimestamp == null &&
          p.status?.phase === 'Pending' &&
          (p.spec?.nodeName ?? '') === '',
      );
  }

  /** The model's engine key: sealed in the store (shared by every control plane), made once. */
  async #keyOf(model: string): Promise<string> {
    const known = this.#keys.get(model);
    if (known !== undefined) return known;
    const id = `${keyPrefix}${model}`;
    let sealed = await this.#o.store.shared.get(id);
    sealed ??= await this.#o.store.shared.putIfAbsent(id, this.#o.keys.seal(id, generateSecret('engine')));
    const key = this.#o.keys.open(id, sealed);
    this.#keys.set(model, key);
    return key;
  }

  // Views

  #port(): number {
    return this.#o.settings().pods.engine_port;
  }

  #views(): ReplicaView[] {
    const specs = new Map([...this.#wanted.values()].map((w) => [w.spec.name, w.spec]));
    const port = this.#port();
    return groupPods(this.#o.cluster.pods()).map((g) => {
      const view = replicaView({ ...g, engine: null, port });
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
      for (let i = have; i < w.replicas; i++) {
        views.push({
          id: null,
          model: w.spec.name,
          profile: w.profile.name,
          engine: w.profile.engine,
          state: 'pending',
          reason: problem ?? 'waiting for Kubernetes to make its pod',
          restarts: 0,
          shards: [],
        });
      }
    }
    return views;
  }

  replica(id: string): ReplicaView {
    const v = this.#views().find((x) => x.id === id);
    if (v === undefined)
      throw new LlmgwError(
        'not_found',
        `no replica is named "${id}" (llmgw ctl replicas lists them; in Kubernetes a replica is its pod)`,
      );
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
    const name = workloadName(v.model, v.profile);
    this.#restarts.set(name, new Date().toISOString());
    if (!this.#leads)
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
          apiKey: await this.#keyOf(spec.name),
          llamaParallel,
        }),
      );
    }
    const models = specs.map((m) => {
      const wanted = this.#o.scaledReplicas?.(m) ?? m.replicas;
      const mine = views.filter((v) => v.model === m.name && v.id !== null);
      const problem = this.#problems.get(m.name);
      const pendingCount = Math.max(0, wanted - mine.length);
      return catalogEntry(m, {
        wanted,
        replicas: mine.map(replicaOfModel),
        pending:
          problem === undefined || pendingCount === 0 ? undefined : { count: pendingCount, reason: problem },
      });
    });
    return { replicas, models };
  }

  /**
   * The engine container's log of the replica's pod (of its rank's pod, for a LeaderWorkerSet's
   * group), read through the API as kubectl logs does; a pod the scheduler has not placed has
   * none yet, and says why.
   */
  async logs(
    id: string,
    options: {
      rank: number;
      tail: number;
      follow: boolean;
      signal: AbortSignal;
      onLines: (lines: string[]) => void;
    },
  ): Promise<void> {
    const group = groupPods(this.#o.cluster.pods()).find((g) => g.leader.metadata?.name === id);
    if (group === undefined) this.replica(id);
    const pod = group === undefined ? undefined : [group.leader, ...group.workers][options.rank];
    const name = pod?.metadata?.name;
    if (pod === undefined || name === undefined)
      throw new LlmgwError(
        'not_found',
        `replica ${id} has no rank ${options.rank} (its ${group?.workers.length === 0 ? 'one pod is rank 0' : `pods are ranks 0 to ${group?.workers.length ?? 0}`})`,
      );
    const state = podState(pod);
    if (state.state === 'pending')
      throw new LlmgwError(
        'conflict',
        `replica ${id}'s pod ${name} is Pending: ${state.reason ?? 'waiting to be scheduled'}`,
      );
    // The engine waits on the downloader: the API's answer would be "waiting to start: PodInitializing".
    if (state.state === 'downloading')
      throw new LlmgwError(
        'conflict',
        `replica ${id}'s engine has not started: ${state.reason ?? 'its init container runs'}; its progress: kubectl -n ${this.#o.settings().pods.namespace} logs ${name} -c download`,
      );
    const lines = lineSplitter();
    await this.#o.cluster.podLog(name, {
      container: engineContainer,
      tail: options.tail,
      follow: options.follow,
      signal: options.signal,
      onText: (text) => options.onLines(lines.push(text)),
    });
    const rest = lines.end();
    if (rest.length > 0) options.onLines(rest);
  }

  nodeViews(): NodeView[] {
    const pods = this.#o.cluster.pods();
    return this.#o.cluster
      .nodes()
      .map((n) => kubeNodeView(n, pods))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  refusal(operation: string): string {
    return `${operation} is for nodes with an llmgw agent, and this control plane runs in Kubernetes mode (kubernetes: in its settings): the kubelet runs the engines, and model files come from kubernetes.models.pvc or its downloader init container`;
  }
}

/** Text in chunks as whole lines: push gives the lines a chunk completes, end the unfinished last one. */
export function lineSplitter(): { push(text: string): string[]; end(): string[] } {
  let partial = '';
  return {
    push(text) {
      const parts = (partial + text).split('\n');
      partial = parts.pop() ?? '';
      return parts;
    },
    end() {
      const rest = partial;
      partial = '';
      return rest === '' ? [] : [rest];
    },
  };
}

/**
 * The profile a model runs as: the one its objects already run (no flip-flop as nodes come and
 * go), else the first whose device class the cluster's nodes offer (or a CPU profile), else the
 * first: its pods then wait, with the scheduler's reason.
 */
export function chooseProfile(
  spec: ModelSpec,
  offered: ReadonlySet<string>,
  existing: ReadonlyMap<string, unknown>,
): ProfileSpec {
  const first = spec.profiles[0];
  if (first === undefined) throw new Error(`model ${spec.name} has no profile`);
  return (
    spec.profiles.find((p) => existing.has(workloadName(spec.name, p.name))) ??
    spec.profiles.find((p) => isCpuProfile(p) || (p.gpu_class !== undefined && offered.has(p.gpu_class))) ??
    first
  );
}

function templateAnnotations(w: Workload | undefined): Record<string, string> | undefined {
  return w === undefined ? undefined : templatesOf(w)[0]?.metadata?.annotations;
}
