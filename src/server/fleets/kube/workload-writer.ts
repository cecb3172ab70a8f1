import type { Logger } from 'pino';

import { isCpuProfile, type ModelSpec, type ProfileSpec } from '../../../catalog/model-spec.js';
import { LlmgwError } from '../../../core/errors.js';
import type { KubeCluster } from '../../../kube/client.js';
import type { productsByClass } from '../../../kube/manifests.js';
import {
  engineKeySecret,
  engineKeySecretKey,
  hubTokenSecret,
  hubTokenSecretKey,
  hubTokenSecretName,
  keepingPlacedPods,
  templatesOf,
  workloadLabels,
  type PodSettings,
  type Workload,
  type WorkloadInput,
} from '../../../kube/manifests.js';
import { restartedAtAnnotation, secretName, specHashAnnotation, workloadName } from '../../../kube/names.js';
import type { Origin } from '../../../models/origin.js';

import type { ModelKeys } from './model-keys.js';

/** The chosen profile of a model, with the count the catalog or the autoscaler wants. */
export interface Wanted {
  spec: ModelSpec;
  profile: ProfileSpec;
  replicas: number;
}

/** hub.endpoint and hub.token, as the settings have them. */
export interface HubSettings {
  endpoint?: string | undefined;
  token?: string | undefined;
}

/** What a workload is written with, besides the model: read once per pass. */
export interface WriteContext {
  origin: Origin | undefined;
  pods: PodSettings;
  llamaParallel: number;
  products: ReturnType<typeof productsByClass>;
  hub: WorkloadInput['hub'];
}

/**
 * Writes a model's objects: its Deployment (or LeaderWorkerSet), the Secret of its engine key,
 * and the Secret of hub.token the download init containers read. Writes only what changed.
 */
export class WorkloadWriter {
  readonly #cluster: KubeCluster;
  readonly #keys: ModelKeys;
  readonly #logger: Logger;
  /** Rolling restarts asked for, by workload name: the template annotation to write. */
  readonly #restarts = new Map<string, string>();
  /** Models whose Secret holds their key, as last read or written here. */
  readonly #secretsOk = new Set<string>();
  /** hub.token as last written to its Secret (undefined: none written, or deleted). */
  #hubToken: string | undefined;

  constructor(o: { cluster: KubeCluster; keys: ModelKeys; logger: Logger }) {
    this.#cluster = o.cluster;
    this.#keys = o.keys;
    this.#logger = o.logger;
  }

  /** A rolling restart of a workload (kubectl rollout restart's way), written at the next pass. */
  restart(workload: string): void {
    this.#restarts.set(workload, new Date().toISOString());
  }

  /** The Secrets are read again at the next write: one deleted by hand is made again. */
  recheckSecrets(model?: string): void {
    if (model === undefined) this.#secretsOk.clear();
    else this.#secretsOk.delete(model);
  }

  /**
   * Where the download init containers fetch from: hub.endpoint, and hub.token kept in a
   * Secret of llmgw's (written when it changes, deleted when unset) that the pods read.
   */
  async hub(namespace: string, settings: HubSettings | undefined): Promise<WorkloadInput['hub']> {
    const token = settings?.token;
    if (token !== this.#hubToken) {
      if (token === undefined) await this.#cluster.remove('Secret', hubTokenSecretName);
      else await this.#cluster.apply(hubTokenSecret(namespace, token));
      this.#hubToken = token;
    }
    return hubInput(settings);
  }

  async write(w: Wanted, current: Workload | undefined, c: WriteContext): Promise<void> {
    const { spec } = w;
    const { pods } = c;
    const workload = this.compose(w, current, c);
    const name = workload.metadata?.name ?? '';
    const restartedAt = templateAnnotations(workload)?.[restartedAtAnnotation];
    // The Secret is read once a minute per model (and after a failed pass): not on every pass.
    if (!this.#secretsOk.has(spec.name)) {
      const key = await this.#keys.keyOf(spec.name);
      const secret = await this.#cluster.readSecret(secretName(spec.name));
      const stored = secret?.data?.[engineKeySecretKey];
      if (stored === undefined || Buffer.from(stored, 'base64').toString('utf8') !== key)
        await this.#cluster.apply(engineKeySecret(spec.name, pods.namespace, key));
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
    this.#logger.info(
      {
        object: `${workload.kind}/${name}`,
        replicas: w.replicas,
        hash: workload.metadata?.annotations?.[specHashAnnotation],
      },
      current === undefined ? 'creating' : 'updating',
    );
    await this.#cluster.apply(workload);
  }

  /**
   * The workload (Deployment or LeaderWorkerSet) a model is written as, beside `current`, its
   * rolling restart kept: what `write` applies, and what `ctl model add --dry-run -o yaml` prints.
   */
  compose(w: Wanted, current: Workload | undefined, c: WriteContext): Workload {
    const { spec, profile } = w;
    const { origin, pods, llamaParallel, products } = c;
    if (profile.nodes > 1 && !this.#cluster.leaderWorkerSets) {
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
    return workload;
  }

  /** Whether a pod of this model's profile waits for the scheduler to find it a node. */
  #waitsForNode(model: string, profile: string): boolean {
    const labels = workloadLabels(model, profile);
    return this.#cluster
      .pods()
      .some(
        (p) =>
          Object.entries(labels).every(([k, v]) => p.metadata?.labels?.[k] === v) &&
          p.metadata?.deletionTimestamp == null &&
          p.status?.phase === 'Pending' &&
          (p.spec?.nodeName ?? '') === '',
      );
  }
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
    spec.profiles.find((p) => existing.has(workloadName(spec.name, p))) ??
    spec.profiles.find((p) => isCpuProfile(p) || (p.gpu_class !== undefined && offered.has(p.gpu_class))) ??
    first
  );
}

/** hub.endpoint, and the Secret of hub.token the download init containers read when one is set. */
export function hubInput(settings: HubSettings | undefined): WorkloadInput['hub'] {
  return {
    endpoint: settings?.endpoint,
    tokenSecret:
      settings?.token === undefined ? undefined : { name: hubTokenSecretName, key: hubTokenSecretKey },
  };
}

function templateAnnotations(w: Workload | undefined): Record<string, string> | undefined {
  return w === undefined ? undefined : templatesOf(w)[0]?.metadata?.annotations;
}
