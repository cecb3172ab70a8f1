import type { ModelSpec } from '../../catalog/model-spec.js';
import type { Origin } from '../../models/origin.js';
import type { ModelDownloads, NodeCache, NodeDownload, PullStarted } from '../../protocol/cache-views.js';
import type { ReplicaView, RestartResult } from '../../protocol/replica-views.js';
import type { RollOptions, RolloutView } from '../../protocol/rollout-views.js';
import type { RouteTable } from '../../protocol/routes.js';

/** How a shard's log is read: the last `tail` lines, then (follow) each new one until `signal` aborts. */
export interface LogOptions {
  rank: number;
  tail: number;
  follow: boolean;
  signal: AbortSignal;
  onLines: (lines: string[]) => void;
}

/**
 * The replicas of the catalog's models, wherever they run: what the API, the autoscaler, the
 * gateway's route table and `ctl` ask of them. One implementation runs engines on llmgw's
 * agents (agent/), one as Kubernetes objects (kube/); the control plane picks one at start.
 * What only agents do (pulls, node caches) the Kubernetes fleet refuses, saying why.
 */
export interface Fleet {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Whether this control plane places (or writes) replicas now: the only one, or the leader. */
  readonly leads: boolean;
  /** Places again soon: the catalog, a node or a setting changed. Calls close together run once. */
  poke(): void;
  /** Places now, and returns once done. */
  reconcile(): Promise<void>;
  /** Waits until a placement that was asked for has run. */
  settled(): Promise<void>;

  /** Every replica (of one model), the ones not placed yet as pending with why. */
  replicas(model?: string): ReplicaView[];
  /** One replica; not_found when no replica has that id. */
  replica(id: string): ReplicaView;
  /** Restarts a replica: a new one beside it first, or (in place) it stops first. */
  restart(id: string, inPlace: boolean, actor: string): Promise<RestartResult>;
  /**
   * Refuses (conflict) a change whose replicas would find no room on their profile once
   * changed, saying what is missing; what rollModel checks first, for a dry run. Resolves to
   * how many of the model's replicas the change would start again.
   */
  checkRoll(model: string, next: ModelSpec, o: Pick<RollOptions, 'inPlace'>): Promise<number>;
  /** Rolls a change of a model's spec over its replicas; `write` stores the new spec. */
  rollModel(model: string, next: ModelSpec, o: RollOptions, write: () => Promise<void>): Promise<RolloutView>;
  /**
   * The Kubernetes objects this fleet would write for a model as `spec` says, written nowhere
   * (`ctl model add --dry-run -o yaml`); refused (precondition_failed) where engines run on agents.
   * Secrets (engine keys, hub.token) are llmgw's own and not among them.
   */
  manifests(spec: ModelSpec, origin: Origin | undefined): Promise<Record<string, unknown>[]>;
  /** A model's latest rollout; undefined when it never had one (or the fleet keeps none). */
  rollout(model: string): Promise<RolloutView | undefined>;
  /** What the gateway routes to: the replicas that answer, and every model of the catalog. */
  routeTable(): Promise<RouteTable>;
  /** A shard's engine log (see LogOptions). */
  logs(id: string, options: LogOptions): Promise<void>;

  /** Fetches a model's files onto nodes ahead of placement (`ctl model pull`). */
  pull(model: string, origin: Origin, nodes?: readonly string[]): PullStarted;
  /** Each node's download of a model's files, as last reported. */
  downloads(model: string, origin: Origin): ModelDownloads;
  /** Every download running on a node now. */
  activeDownloads(): NodeDownload[];
  /** What each node's cache holds (the named node, else every connected one). */
  caches(node?: string, timeoutMs?: number): Promise<NodeCache[]>;
  /** Removes a model's files from the nodes (`ctl model rm --purge`); the names of the nodes asked. */
  purge(model: string, origin: Origin): Promise<string[]>;
}

/** A model's downloads over `nodes` (none where no node fetches, as under Kubernetes). */
export function modelDownloads(
  model: string,
  origin: Origin,
  nodes: ModelDownloads['nodes'] = [],
): ModelDownloads {
  return {
    model,
    source: origin.source,
    ...(origin.commit === undefined ? {} : { commit: origin.commit }),
    nodes,
  };
}
