import { randomUUID } from 'node:crypto';

import type { Logger } from 'pino';

import type { ModelSpec } from '../../../catalog/model-spec.js';
import { didYouMeanSuffix } from '../../../core/did-you-mean.js';
import { LlmgwError, messageOf } from '../../../core/errors.js';
import { clientText } from '../../../core/redact.js';
import { generateSecret } from '../../../core/secrets.js';
import { deviceLabel } from '../../../gpu/devices.js';
import { blobKey } from '../../../models/cache-layout.js';
import { defaultHubEndpoint, type HubAccess } from '../../../models/hub.js';
import type { Origin } from '../../../models/origin.js';
import { parseSource } from '../../../models/source.js';
import type { ModelMemory, PendingReplica, PlacementNode, PortRange, Shard } from '../../../placement/types.js';
import {
  agentReconnectMaxMs,
  maxPortRanges,
  type AgentMessage,
  type AssignedShard,
  type DownloadReport,
  type EngineReport,
  type EngineSettingsWire,
  type ShardStatusWire,
  type WeightsSettingsWire,
} from '../../../protocol/agent-protocol.js';
import {
  type ModelDownloads,
  type NodeCache,
  type NodeDownload,
  type PullStarted,
} from '../../../protocol/cache-views.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { ReplicaView, RestartResult, ShardView } from '../../../protocol/replica-views.js';
import type { RollOptions, RolloutView } from '../../../protocol/rollout-views.js';
import {
  LeaseLost,
  type FleetChange,
  type ReplicaRecord,
  type RolloutRecord,
  type Store,
} from '../../../store/store.js';
import type { RouteReplica, RouteTable } from '../../../protocol/routes.js';
import type { Catalog } from '../../catalog.js';
import type { LeaderView } from '../../cluster/leadership.js';
import type { FleetDelegate } from '../kube/delegate.js';
import type { AgentHub, HubListener } from '../../nodes/agent-hub.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import type { SettingsHolder } from '../../settings-holder.js';

import { systemActor } from '../../admin-key.js';

import { aggregate } from './aggregate.js';
import type { ReplicaOfModel } from '../availability.js';
import { catalogEntry, replicaOfModel, routeReplica } from '../route-entries.js';
import { replicaEndpoint } from '../endpoint.js';
import type { EngineKeys } from '../engine-keys.js';
import {
  planFleet,
  runsAsSpecified,
  type FleetPlanInput,
  type NewReplica,
  type PlanRollout,
} from './fleet-plan.js';
import { rolloutProgress } from './rollout-progress.js';
import type { EventPublisher } from '../../events/event-hub.js';
import {
  publishDownloads,
  publishPlacement,
  publishStatuses,
  statusChanges,
  type PlacementView,
} from '../../events/fleet-changes.js';

export interface FleetOptions {
  store: Store;
  catalog: Catalog;
  registry: NodeRegistry;
  hub: AgentHub;
  settings: SettingsHolder;
  logger: Logger;
  /** Seals the engine keys the store keeps. */
  keys: EngineKeys;
  /** How often placement runs even when nothing prompts it. */
  intervalMs?: number;
  /** The hub agents fetch from when the mirror is off (hub.endpoint, hub.token). */
  hubAccess?: () => HubAccess;
  /** Told what placement and the agents' reports changed (GET /events). */
  events?: EventPublisher;
  /** Whether this control plane leads (places); without it, it always does (one control plane). */
  leader?: LeaderView;
  /** This control plane's id: the nodes' reports it shares carry it. */
  controlPlaneId?: string;
  /** An autoscaled model's count (the autoscaler's), run instead of its `replicas`; undefined for the others. */
  scaledReplicas?: (spec: ModelSpec) => number | undefined;
  /**
   * What places replicas instead of the agents (Kubernetes mode): replicas, routes, restarts, logs
   * are its; what only agents do (pulls, node caches) is refused in its words.
   */
  delegate?: FleetDelegate;
}

/** What an agent last said of its shards, as control planes share it through the store. */
interface ShardReport {
  statuses: ShardStatusWire[];
  engines?: EngineReport | undefined;
  ports_taken?: [number, number][] | undefined;
}

/** How long a follower waits for the leader to place after a change made through it (restart, roll). */
const leaderPassMs = 5000;
/** How often a follower reads the placement again without a notification (one may be lost). */
const followerResyncMs = 30_000;

interface Reported {
  nodeId: string;
  status: ShardStatusWire;
}

/** A cache_list sent to a node, waiting for its answer. */
interface CacheRequest {
  nodeId: string;
  node: string;
  done: (answer: NodeCache) => void;
}

interface LogRequest {
  nodeId: string;
  onLines: (lines: string[]) => void;
  onDone: (error?: string) => void;
}

/**
 * The fleet of replicas: places each model's replicas onto nodes (a pure function over
 * the catalog, the nodes and the shards already placed), keeps that placement in the
 * store under a cluster-wide lock, tells each agent what its node should run, and
 * collects what the agents report. Placement is persisted, so a restarted control
 * plane computes the same assignment and no engine restarts.
 */
export class Fleet implements HubListener {
  readonly #o: FleetOptions;
  readonly #statuses = new Map<string, Reported>();
  readonly #engines = new Map<string, EngineReport>();
  /** Ports other programs listen on, by node id, as its agent last said. */
  readonly #portsTaken = new Map<string, PortRange[]>();
  /**
   * Nodes connected here whose agent has reported since it connected: only those take new
   * shards, so that none is placed on a port the node would have said is taken.
   */
  readonly #reported = new Set<string>();
  readonly #assigned = new Map<string, string>();
  readonly #logRequests = new Map<string, LogRequest>();
  readonly #cacheRequests = new Map<string, CacheRequest>();
  /** Each node's downloads, as its agent last reported them (kept while it is away). */
  readonly #downloads = new Map<string, DownloadReport[]>();
  #pending: PendingReplica[] = [];
  /** Pinned origins by source, as resolved; kept for replicas of an older spec still running. */
  readonly #origins = new Map<string, Origin>();
  /** Blob keys of every file of the catalog's models (agents evict the others first). */
  #catalogBlobs: string[] = [];
  /** Engine keys opened (or made) here, by replica id. */
  readonly #keys = new Map<string, string>();
  /** Replicas whose stored keys this control plane's secret does not open. */
  readonly #unkeyed = new Set<string>();
  /** The catalog as the last placement saw it. */
  #specs = new Map<string, ModelSpec>();
  #replicas: ReplicaRecord[] = [];
  #shards: Shard[] = [];
  /** Each model's latest rollout, as the last placement read it. */
  #rollouts = new Map<string, RolloutRecord>();
  /** Why each replica's engine last failed, as its agent said (a failed shard soon starts again). */
  readonly #failures = new Map<string, string>();
  /** While a rollout is being recorded: placement waits, so it never runs the change before its mode is known. */
  #held = 0;
  #running: Promise<void> | undefined;
  #again = false;
  /** How long the last placement pass took: the next waits at least as long. */
  #lastPassMs = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Reports of nodes connected here, waiting to be written for the other control planes. */
  readonly #unshared = new Map<string, ShardReport>();
  #shareTimer: NodeJS.Timeout | undefined;
  #sharing: Promise<void> = Promise.resolve();
  /** The pending list as last written for the other control planes. */
  #pendingShared = '';
  readonly #unlisten: (() => void)[] = [];
  /** The cluster CA, which the nodes' engine forwarders' certificates chain to (TLS on). */
  #engineCa: string | undefined;
  /** Nodes whose agents report to another control plane, by the id of that one. */
  readonly #reportedTo = new Map<string, string>();
  /** When this control plane last read the leader's placement. */
  #followedAt = 0;
  /** Followers waiting for the leader's next placement. */
  #leaderPassed: (() => void)[] = [];

  constructor(options: FleetOptions) {
    this.#o = options;
  }

  /** Several control planes may share this store (PostgreSQL): reports are shared and wake-ups heard. */
  get #shared(): boolean {
    return this.#o.store.dialect === 'postgres' && this.#o.controlPlaneId !== undefined;
  }

  async start(): Promise<void> {
    this.#o.hub.listen(this);
    const delegate = this.#o.delegate;
    if (delegate !== undefined) {
      this.#o.settings.onChange(() => delegate.poke());
      return delegate.start();
    }
    this.#o.registry.onStateChange(() => this.poke());
    this.#o.registry.setUsage(() => this.devicesInUse());
    this.#o.settings.onChange(() => this.poke());
    this.#o.leader?.onChange(() => this.poke());
    if (this.#shared) {
      const cluster = this.#o.store.cluster;
      const me = this.#o.controlPlaneId;
      this.#unlisten.push(
        // Another control plane's placement: what runs where changed.
        cluster.listen('fleet', (from) => {
          if (from === me) return;
          for (const done of this.#leaderPassed.splice(0)) done();
          this.poke();
        }),
        // A change made through another control plane's API: the leader places it.
        cluster.listen('models', (from) => {
          if (from !== me) this.poke();
        }),
        cluster.listen('reports', (payload) => void this.#loadReports(payload)),
      );
      await this.#loadReports('');
    }
    await this.reconcile();
    // The leader places on this beat too (a node lost past its grace); a follower is woken by the
    // leader's notifications and reads the store again only now and then, should one be lost.
    this.#timer = setInterval(() => {
      if (this.leads || !this.#shared || Date.now() - this.#followedAt >= followerResyncMs) this.poke();
    }, this.#o.intervalMs ?? 5000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#o.delegate !== undefined) return this.#o.delegate.stop();
    if (this.#timer !== undefined) clearInterval(this.#timer);
    for (const u of this.#unlisten.splice(0)) u();
    for (const done of this.#leaderPassed.splice(0)) done();
    await this.#running;
    await this.#flushReports();
  }

  /**
   * Places now, after a change made through this control plane (a restart, a roll): here when
   * it leads; else the leader is woken and its placement awaited (for a few seconds at most),
   * then read.
   */
  async #placeNow(): Promise<void> {
    if (this.leads || !this.#shared) return this.reconcile();
    const passed = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, leaderPassMs);
      this.#leaderPassed.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    await this.#o.store.cluster.notify('models', this.#o.controlPlaneId);
    await passed;
    await this.reconcile();
  }

  /** Gateways verify the nodes' engine forwarders against this CA (the route table carries it). */
  trustEngines(caPem: string): void {
    this.#engineCa = caPem;
  }

  /** Whether this control plane places replicas now (the only one, or the leader). */
  get leads(): boolean {
    return this.#o.leader?.leads() ?? true;
  }

  /** Places again soon: the catalog, a node or a replica changed. Calls close together run once. */
  poke(): void {
    if (this.#stopped) return;
    if (this.#o.delegate !== undefined) {
      this.#o.delegate.poke();
      return;
    }
    if (this.#running !== undefined || this.#held > 0) {
      this.#again = true;
      return;
    }
    // Not at once, but after the I/O at hand and at least as long as the last pass took:
    // a storm of agents joining is placed in a few passes, not one per agent back to back,
    // and placement never holds more than about half of the event loop.
    this.#running = new Promise((resolve) => setTimeout(resolve, this.#lastPassMs))
      .then(async () => {
        const started = performance.now();
        await this.reconcile();
        this.#lastPassMs = Math.min(performance.now() - started, 2000);
      })
      .catch((e: unknown) => this.#o.logger.error({ err: messageOf(e) }, 'placement failed'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  /** Waits until a placement that was asked for has run (tests, and API calls that report its outcome). */
  async settled(): Promise<void> {
    if (this.#o.delegate !== undefined) return this.#o.delegate.settled();
    while (this.#running !== undefined) await this.#running;
  }

  /**
   * The leader places and writes the result (fenced: a leader that lost its lease writes
   * nothing); every other control plane reads what the leader wrote. Either way the agents
   * connected here are told what their nodes should run.
   */
  async reconcile(): Promise<void> {
    if (this.#o.delegate !== undefined) return this.#o.delegate.reconcile();
    if (!this.leads) return this.#follow();
    try {
      await this.#lead();
    } catch (e) {
      if (!(e instanceof LeaseLost)) throw e;
      this.#o.leader?.lost(e.message);
      await this.#follow();
    }
  }

  async #lead(): Promise<void> {
    const now = Date.now();
    const { specs, unresolved, memory } = await this.#resolvedSpecs();
    const fence = this.#o.leader?.fence();
    if (this.#o.leader !== undefined && fence === undefined)
      throw new LeaseLost('this control plane no longer holds the leader lease');

    const result = await this.#o.store.fleet.locked(async (tx) => {
      if (fence !== undefined) await tx.cluster.checkFence(fence);
      const input = await this.#planInput(tx, specs, memory, now);
      const { ready } = input;
      const plan = planFleet(input);
      for (const r of plan.retire) await tx.fleet.retire(r.id, r.reason, systemActor);
      const add = await this.#named(tx, plan.add);
      if (add.length > 0 || plan.remove.length > 0)
        await tx.fleet.apply({ add, remove: plan.remove }, systemActor);
      for (const r of plan.retire)
        this.#o.logger.info({ replica: r.id, reason: r.reason }, 'replica to be replaced');
      for (const r of plan.remove)
        this.#o.logger.info({ replica: r.id, reason: r.reason }, 'replica removed');
      for (const a of add)
        this.#o.logger.info({ replica: a.replica.id, nodes: a.shards.map((s) => s.node) }, 'replica placed');
      const after = await tx.fleet.replicas();
      const { rollouts, ended } = await this.#endRollouts(tx, specs, after, ready);
      const pending = [...plan.pending, ...unresolved];
      if (this.#shared) {
        const text = JSON.stringify(pending);
        if (text !== this.#pendingShared) await tx.cluster.putState('pending', text);
        const changed =
          add.length + plan.remove.length + plan.retire.length + ended > 0 || text !== this.#pendingShared;
        this.#pendingShared = text;
        // Sent when this transaction commits: the others then read what it wrote.
        if (changed) await tx.cluster.notify('fleet', this.#o.controlPlaneId);
      }
      return { pending, replicas: after, shards: await tx.fleet.shards(), rollouts };
    });
    this.#take(result, specs);
  }

  /** A follower's pass: what the leader placed, from the store. */
  async #follow(): Promise<void> {
    this.#followedAt = Date.now();
    const { specs } = await this.#resolvedSpecs();
    const store = this.#o.store;
    const [replicas, shards, rollouts, pending] = await Promise.all([
      store.fleet.replicas(),
      store.fleet.shards(),
      store.rollouts.list(),
      store.cluster.state('pending'),
    ]);
    // Should it lead again, it writes its own list whatever the last one it wrote was.
    this.#pendingShared = '';
    this.#take(
      {
        replicas,
        shards,
        rollouts: new Map(rollouts.map((r) => [r.model, r])),
        pending: pending === undefined ? [] : (JSON.parse(pending) as PendingReplica[]),
      },
      specs,
    );
  }

  /** Makes a placement (this one's, or the leader's) the one served here and told to the agents here. */
  #take(
    result: {
      pending: PendingReplica[];
      replicas: ReplicaRecord[];
      shards: Shard[];
      rollouts: Map<string, RolloutRecord>;
    },
    specs: readonly ModelSpec[],
  ): void {
    const before = this.#placementView();
    this.#rollouts = result.rollouts;
    this.#pending = result.pending;
    this.#specs = new Map(specs.map((s) => [s.name, s]));
    this.#replicas = result.replicas;
    this.#shards = result.shards;
    const ids = new Set(this.#shards.map((s) => `${s.replica}/${s.rank}`));
    for (const key of this.#statuses.keys()) if (!ids.has(key)) this.#statuses.delete(key);
    const live = new Set(this.#replicas.map((r) => r.id));
    for (const id of this.#keys.keys()) if (!live.has(id)) this.#keys.delete(id);
    for (const id of this.#unkeyed) if (!live.has(id)) this.#unkeyed.delete(id);
    for (const id of this.#failures.keys()) if (!live.has(id)) this.#failures.delete(id);
    this.#pushAll();
    if (this.#o.events !== undefined) publishPlacement(this.#o.events, before, this.#placementView());
  }

  #placementView(): PlacementView {
    return {
      replicas: this.#replicas,
      shards: this.#shards,
      pending: this.#pending,
      rollouts: this.#rollouts,
    };
  }

  /** What planning reads, from the store (`tx`) and what the nodes said: one assembly for placement and its dry runs. */
  async #planInput(
    tx: Store,
    specs: readonly ModelSpec[],
    memory: FleetPlanInput['memory'],
    now: number,
  ): Promise<FleetPlanInput> {
    const settings = this.#o.settings.current.settings;
    const views = this.#o.registry.views();
    const [first, last] = settings.placement.ports.split('-').map(Number) as [number, number];
    const replicas = await tx.fleet.replicas();
    const shards = await tx.fleet.shards();
    const rollouts = new Map<string, PlanRollout>((await tx.rollouts.list()).map((r) => [r.model, r]));
    const { ready, portTaken } = this.#reportedOf(shards, views);
    return {
      specs,
      memory,
      replicas,
      shards,
      nodes: views.map((v) => ({
        node: placementNode(v, {
          portsTaken: this.#portsTaken.get(v.id) ?? [],
          heard: this.#reported.has(v.id) || !this.#o.registry.isConnected(v.id),
        }),
        lastSeen: Date.parse(v.last_seen),
      })),
      ready,
      unkeyed: new Set(replicas.filter((r) => this.#engineKey(r) === undefined).map((r) => r.id)),
      portTaken,
      now,
      upSince: this.#o.registry.upSince,
      lostAfterS: settings.placement.node_lost_after_s,
      reconnectS: agentReconnectMaxMs / 1000,
      ports: { first, last },
      cpuThreads: settings.placement.cpu_threads,
      rollouts,
    };
  }

  /**
   * Ends the rollouts that are done or failed, after a placement pass (in its transaction),
   * each end audited as the system; returns every model's latest rollout.
   */
  async #endRollouts(
    tx: Store,
    specs: readonly ModelSpec[],
    replicas: readonly ReplicaRecord[],
    ready: ReadonlySet<string>,
  ): Promise<{ rollouts: Map<string, RolloutRecord>; ended: number }> {
    const out = new Map<string, RolloutRecord>();
    let ended = 0;
    for (const r of await tx.rollouts.list()) {
      out.set(r.model, r);
      const spec = specs.find((s) => s.name === r.model);
      if (r.state !== 'rolling' || spec === undefined) continue;
      const { end } = rolloutProgress(r, spec, replicas, {
        isReady: (id) => ready.has(id),
        failure: (id) => this.#failure(id),
      });
      if (end === undefined || !(await tx.rollouts.finish(r.model, r.started_at, end, systemActor))) continue;
      const error = end.state === 'failed' ? end.error : null;
      out.set(r.model, { ...r, state: end.state, finished_at: new Date().toISOString(), error });
      ended++;
      if (error === null) this.#o.logger.info({ model: r.model, change: r.change }, 'rollout done');
      else this.#o.logger.warn({ model: r.model, change: r.change, err: error }, 'rollout failed');
    }
    return { rollouts: out, ended };
  }

  /**
   * Why a replica's engine failed, in its own words: the last failure its agent reported (an
   * exit with its last error line, files that could not be fetched), else its last exit.
   * Undefined for one that has not failed; a port another program took is no failure of it.
   */
  #failure(id: string): string | undefined {
    const seen = this.#failures.get(id);
    if (seen !== undefined) return seen;
    for (const s of this.#shards.filter((x) => x.replica === id)) {
      const exit = this.#statuses.get(`${s.replica}/${s.rank}`)?.status.last_exit;
      if (exit === undefined) continue;
      const how =
        exit.signal === null ? `exited with code ${exit.code ?? '?'}` : `was killed by ${exit.signal}`;
      const line = exit.log_tail.findLast((l) => /error/i.test(l));
      return `its engine ${how}${line === undefined ? '' : `; its last error line: ${line.trim().slice(0, 300)}`}`;
    }
    return undefined;
  }

  /**
   * The specs placement may place: a model fetched from the hub or a URL only once its source
   * resolved to pinned files (agents download nothing else). Those not resolved yet wait, with why.
   */
  async #resolvedSpecs(): Promise<{
    specs: ModelSpec[];
    unresolved: PendingReplica[];
    memory: Map<string, ModelMemory>;
  }> {
    const models = await this.#o.catalog.list();
    const specs: ModelSpec[] = [];
    const unresolved: PendingReplica[] = [];
    const memory = new Map<string, ModelMemory>();
    const blobs = new Set<string>();
    for (const { metadata: _m, status, ...written } of models) {
      const scaled = this.#o.scaledReplicas?.(written);
      const spec = scaled === undefined ? written : { ...written, replicas: scaled };
      const origin = status.origin;
      // Placement asks the memory planner where a replica fits once the shape is known.
      if (status.shape !== undefined) memory.set(spec.name, { shape: status.shape, files: origin?.files });
      if (origin !== undefined) {
        this.#origins.set(spec.source, origin);
        for (const f of origin.files) blobs.add(blobKey(origin, f));
      }
      if (origin === undefined && parseSource(spec.source).kind !== 'path') {
        if (spec.replicas > 0)
          unresolved.push({
            model: spec.name,
            count: spec.replicas,
            reason:
              status.problem === undefined
                ? `its source ${spec.source} is being resolved to pinned files`
                : `its source has not resolved: ${status.problem}`,
          });
        continue;
      }
      specs.push(spec);
    }
    this.#catalogBlobs = [...blobs].sort();
    return { specs, unresolved, memory };
  }

  /** Gives new replicas their ids (never reused) and engine keys, sealed for the store. */
  async #named(tx: Store, added: readonly NewReplica[]): Promise<FleetChange['add']> {
    // Read after the retirements above were stamped: a successor is made since its predecessor was marked.
    const createdAt = new Date().toISOString();
    const perModel = new Map<string, NewReplica[]>();
    for (const a of added) perModel.set(a.model, [...(perModel.get(a.model) ?? []), a]);
    const out: FleetChange['add'] = [];
    for (const [model, list] of perModel) {
      const numbers = await tx.fleet.nextReplicaNumbers(model, list.length);
      list.forEach((a, i) => {
        const id = `${model}-${numbers[i] ?? i}`;
        const key = generateSecret('engine');
        this.#keys.set(id, key);
        out.push({
          replica: {
            id,
            model,
            profile: a.profile,
            created_at: createdAt,
            sealed_key: this.#o.keys.seal(id, key),
            spec: a.spec,
            retiring: false,
            retire_reason: null,
            retiring_since: null,
          },
          shards: a.shards.map((s) => ({ ...s, replica: id })),
        });
      });
    }
    return out;
  }

  /** A replica's engine key, opened once; undefined (said once in the log) when it cannot be opened. */
  #engineKey(r: ReplicaRecord): string | undefined {
    let key = this.#keys.get(r.id);
    if (key === undefined) {
      try {
        key = this.#o.keys.open(r.id, r.sealed_key);
      } catch (e) {
        if (!this.#unkeyed.has(r.id))
          this.#o.logger.error(
            { replica: r.id, err: messageOf(e) },
            'engine key unreadable: the replica is replaced',
          );
        this.#unkeyed.add(r.id);
        return undefined;
      }
      this.#keys.set(r.id, key);
    }
    return key;
  }

  // HubListener

  connected(nodeId: string): void {
    this.#assigned.delete(nodeId);
    this.#reported.delete(nodeId);
    this.#push(nodeId);
  }

  disconnected(nodeId: string): void {
    this.#assigned.delete(nodeId);
    this.#reported.delete(nodeId);
    for (const [id, r] of this.#logRequests) {
      if (r.nodeId === nodeId) {
        r.onDone('the node disconnected');
        this.#logRequests.delete(id);
      }
    }
    for (const [id, r] of this.#cacheRequests) {
      if (r.nodeId === nodeId) {
        this.#cacheRequests.delete(id);
        r.done({ node: r.node, entries: [], error: `node ${r.node} disconnected before it answered` });
      }
    }
  }

  inventory(): void {
    this.poke();
  }

  message(nodeId: string, m: Exclude<AgentMessage, { type: 'inventory' | 'heartbeat' }>): void {
    if (m.type === 'shards') {
      const firstReport = !this.#reported.has(nodeId);
      this.#reported.add(nodeId);
      const report: ShardReport = { statuses: m.statuses, engines: m.engines, ports_taken: m.ports_taken };
      this.#ingest(nodeId, report, firstReport);
      this.#share(nodeId, report);
      return;
    }
    if (m.type === 'downloads') {
      this.#downloads.set(nodeId, m.downloads);
      if (this.#o.events !== undefined) publishDownloads(this.#o.events, m.downloads, this.#placementView());
      return;
    }
    if (m.type === 'cache') {
      const req = this.#cacheRequests.get(m.request);
      if (req?.nodeId !== nodeId) return;
      this.#cacheRequests.delete(m.request);
      req.done({
        node: req.node,
        root: m.root,
        ...(m.max_bytes === undefined ? {} : { max_bytes: m.max_bytes }),
        ...(m.free_bytes === undefined ? {} : { free_bytes: m.free_bytes }),
        entries: m.entries,
        ...(m.error === undefined ? {} : { error: m.error }),
      });
      return;
    }
    const req = this.#logRequests.get(m.request);
    if (req === undefined) return;
    if (m.lines.length > 0) req.onLines(m.lines);
    if (m.done) {
      this.#logRequests.delete(m.request);
      req.onDone(m.error);
    }
  }

  /** What a node's agent said of its shards (to this control plane or, through the store, to another). */
  #ingest(nodeId: string, m: ShardReport, firstReport: boolean): void {
    const before = this.#readyReplicas();
    const statusesBefore = new Map(this.#statuses);
    for (const [key, r] of this.#statuses) if (r.nodeId === nodeId) this.#statuses.delete(key);
    const portsBefore = this.#portsTakenSeen();
    let failedRolling = false;
    for (const s of m.statuses) {
      this.#statuses.set(s.key, { nodeId, status: s });
      if (s.state !== 'failed' || s.port_taken !== undefined) continue;
      // The agent starts a failed engine again soon: what it said now is kept for the rollout.
      this.#failures.set(s.replica, (s.reason ?? 'its engine failed').replace(/; restarting in [^;]*$/, ''));
      const model = this.#replicas.find((r) => r.id === s.replica)?.model;
      if (model !== undefined && this.#rollouts.get(model)?.state === 'rolling') failedRolling = true;
    }
    if (m.engines !== undefined) this.#engines.set(nodeId, m.engines);
    if (m.ports_taken !== undefined)
      this.#portsTaken.set(
        nodeId,
        m.ports_taken.slice(0, maxPortRanges).map(([first, last]) => ({ first, last })),
      );
    // A replica that became ready may let a replaced one stop, or a roll go on; a failed one ends a roll.
    const rolling = [...this.#rollouts.values()].some((r) => r.state === 'rolling');
    if (this.#o.events !== undefined)
      publishStatuses(this.#o.events, statusChanges(statusesBefore, this.#statuses), this.#placementView());
    if (
      failedRolling ||
      (this.#readyReplicas() !== before && (rolling || this.#replicas.some((r) => r.retiring)))
    )
      this.poke();
    // A node heard from for the first time takes new shards; a shard whose port another program took is placed again.
    else if (firstReport || this.#portsTakenSeen() !== portsBefore) this.poke();
  }

  /** Writes a report of a node connected here for the other control planes, a few at a time. */
  #share(nodeId: string, report: ShardReport): void {
    if (!this.#shared) return;
    this.#unshared.set(nodeId, report);
    this.#shareTimer ??= setTimeout(() => void this.#flushReports(), 100);
  }

  #flushReports(): Promise<void> {
    if (this.#shareTimer !== undefined) clearTimeout(this.#shareTimer);
    this.#shareTimer = undefined;
    if (this.#unshared.size === 0) return this.#sharing;
    const batch = [...this.#unshared];
    this.#unshared.clear();
    const by = this.#o.controlPlaneId ?? '';
    const at = new Date().toISOString();
    this.#sharing = this.#sharing
      .then(() =>
        this.#o.store.transaction(async (tx) => {
          for (const [node, report] of batch) await tx.cluster.putReport({ node, by, at, report });
          // The nodes' ids, when they fit a notification; else the listeners read every report.
          const ids = batch.map(([node]) => node).join(',');
          await tx.cluster.notify('reports', ids.length < 7000 ? `${by};${ids}` : `${by};`);
        }),
      )
      .catch((e: unknown) =>
        this.#o.logger.warn({ err: messageOf(e) }, "could not share the nodes' reports"),
      );
    return this.#sharing;
  }

  /**
   * Reports other control planes wrote (payload `CP;ID,ID`; empty or `resync`: all of them):
   * those of nodes not connected here are taken as if their agents had said them here.
   */
  async #loadReports(payload: string): Promise<void> {
    const [from, list] = payload.split(';');
    if (from !== undefined && from === this.#o.controlPlaneId && list !== undefined) return;
    const wanted = list === undefined || list === '' ? undefined : new Set(list.split(','));
    let reports;
    try {
      reports = await this.#o.store.cluster.reports();
    } catch (e) {
      this.#o.logger.warn({ err: messageOf(e) }, "could not read the nodes' reports");
      return;
    }
    for (const r of reports) {
      if (r.by !== this.#o.controlPlaneId) this.#reportedTo.set(r.node, r.by);
      if (r.by === this.#o.controlPlaneId || this.#o.registry.isConnected(r.node)) continue;
      if (wanted !== undefined && !wanted.has(r.node)) continue;
      const report = r.report as ShardReport;
      if (!Array.isArray(report.statuses)) continue;
      this.#ingest(r.node, report, false);
    }
  }

  // Views and control

  replicas(model?: string): ReplicaView[] {
    if (this.#o.delegate !== undefined) return this.#o.delegate.replicas(model);
    const views = this.#o.registry.views();
    const out = this.#replicas
      .filter((r) => model === undefined || r.model === model)
      .map((r) => this.#view(r, views));
    for (const p of this.#pending) {
      if (model !== undefined && p.model !== model) continue;
      for (let i = 0; i < p.count; i++) {
        const spec = this.#specOf(p.model);
        out.push({
          id: null,
          model: p.model,
          profile: null,
          engine: spec?.profiles[0]?.engine ?? null,
          state: 'pending',
          reason: p.reason,
          restarts: 0,
          shards: [],
        });
      }
    }
    return out;
  }

  replica(id: string): ReplicaView {
    if (this.#o.delegate !== undefined) return this.#o.delegate.replica(id);
    const r = this.#replicas.find((x) => x.id === id);
    if (r === undefined)
      throw new LlmgwError('not_found', `no replica is named "${id}" (llmgw ctl replicas lists them)`);
    return this.#view(r, this.#o.registry.views());
  }

  /**
   * Restarts a replica: a new one beside it first, or (in place) it stops first. Recorded as
   * its model's rollout (`restart of ID`), which says when the new one is ready or failed.
   */
  async restart(id: string, inPlace: boolean, actor: string): Promise<RestartResult> {
    if (this.#o.delegate !== undefined) return this.#o.delegate.restart(id, inPlace, actor);
    const r = this.#replicas.find((x) => x.id === id);
    if (r === undefined)
      throw new LlmgwError('not_found', `no replica is named "${id}" (llmgw ctl replicas lists them)`);
    const rollout = {
      model: r.model,
      change: `restart of ${id}`,
      mode: inPlace ? ('in-place' as const) : ('surge' as const),
      by: actor,
      spec: this.#specOf(r.model) ?? r.spec,
      replica: id,
      replaces: 1,
      // Before the replica is marked or removed: its successor is made after this.
      started_at: new Date().toISOString(),
    };
    if (inPlace) {
      await this.#o.store.fleet.apply(
        { add: [], remove: [{ id, reason: `restarted in place by ${actor}` }] },
        actor,
      );
      await this.#o.store.rollouts.start(rollout);
      await this.#placeNow();
      return {
        replica: id,
        mode: 'in-place',
        message: `replica ${id} stopped; a new replica of ${r.model} takes its place`,
      };
    }
    await this.#o.store.fleet.retire(id, `restarted by ${actor}`, actor);
    await this.#placeNow();
    const pending = this.#pending.find((p) => p.model === r.model);
    if (pending !== undefined) {
      // No room beside it: keep it running rather than leave a restart hanging.
      await this.#o.store.fleet.retire(id, null, actor);
      await this.#placeNow();
      throw new LlmgwError(
        'conflict',
        `no room beside replica ${id} for the new one (${pending.reason}): restart it in place with --in-place, which stops it first`,
      );
    }
    await this.#o.store.rollouts.start(rollout);
    this.poke();
    return {
      replica: id,
      mode: 'surge',
      message: `a new replica of ${r.model} is starting beside ${id}, which stops once the new one is ready`,
    };
  }

  /**
   * Rolls a change of a model's spec over its replicas (ctl model gpus and context): unless
   * in place, refuses (conflict, naming --in-place) when a successor would find no room beside
   * the replica it replaces, before anything is written; then `write` stores the new spec (and
   * audits it), the roll is recorded (placement waits meanwhile, so that an in-place roll never
   * starts as a surge), and placement runs.
   */
  async rollModel(
    model: string,
    next: ModelSpec,
    o: RollOptions,
    write: () => Promise<void>,
  ): Promise<RolloutView> {
    const delegate = this.#o.delegate;
    if (delegate !== undefined) {
      // Kubernetes rolls a changed pod template itself (the Deployment's rolling update).
      const started_at = new Date().toISOString();
      await write();
      await delegate.reconcile();
      const total = delegate.replicas(model).length;
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
    if (!o.inPlace) await this.#roomBeside(model, next);
    const started_at = new Date().toISOString();
    while (this.#running !== undefined) await this.#running;
    this.#held++;
    try {
      await write();
      // The spec as stored (the write may fill in defaults): the rollout is of that one.
      const stored = (await this.#o.catalog.specs()).find((s) => s.name === model) ?? next;
      await this.#o.store.rollouts.start({
        model,
        change: o.change,
        mode: o.inPlace ? 'in-place' : 'surge',
        by: o.actor,
        spec: stored,
        replica: null,
        // What runs something else now: a change to a profile no replica runs restarts none.
        replaces: this.#replicas.filter(
          (r) => r.model === model && !r.retiring && !runsAsSpecified(r, stored),
        ).length,
        started_at,
      });
    } finally {
      this.#held--;
    }
    await this.#placeNow();
    // A placement asked for while the rollout was being recorded runs now.
    if (this.#again) {
      this.#again = false;
      this.poke();
    }
    const view = await this.rollout(model);
    if (view === undefined) throw new Error(`the rollout of ${model} was recorded but cannot be read back`);
    return view;
  }

  /**
   * Refuses a surge roll of `next` when the first replica it replaces would find no room beside
   * it: a dry run of placement with `next` in place of the model's spec.
   */
  async #roomBeside(model: string, next: ModelSpec): Promise<void> {
    const { specs, memory } = await this.#resolvedSpecs();
    if (!specs.some((s) => s.name === model)) return;
    const input = await this.#planInput(
      this.#o.store,
      specs.map((s) => (s.name === model ? next : s)),
      memory,
      Date.now(),
    );
    const rollouts = new Map(input.rollouts);
    rollouts.set(model, { mode: 'surge', state: 'rolling', spec: next });
    const plan = planFleet({ ...input, rollouts });
    const mine = new Set(input.replicas.filter((r) => r.model === model).map((r) => r.id));
    const replaced = plan.retire.find((c) => mine.has(c.id));
    const pending = plan.pending.find((p) => p.model === model);
    if (replaced === undefined || pending === undefined) return;
    throw new LlmgwError(
      'conflict',
      `no room beside replica ${replaced.id} for a replica of the changed model ${model} (${pending.reason}): roll the change in place with --in-place, which stops each replica first, one at a time`,
    );
  }

  /** A model's latest rollout, with how many of its replicas run the change; undefined when it never had one. */
  async rollout(model: string): Promise<RolloutView | undefined> {
    if (this.#o.delegate !== undefined) return undefined;
    const r = await this.#o.store.rollouts.get(model);
    if (r === undefined) return undefined;
    const spec = this.#specOf(model) ?? r.spec;
    const views = this.#o.registry.views();
    const { replaced, total } = rolloutProgress(r, spec, this.#replicas, {
      isReady: (id) => {
        const x = this.#replicas.find((y) => y.id === id);
        return x !== undefined && this.#view(x, views).state === 'ready';
      },
      failure: () => undefined,
    });
    return {
      model,
      change: r.change,
      mode: r.mode,
      by: r.by,
      started_at: r.started_at,
      state: r.state,
      // A finished roll replaced what it replaced, whatever ran since.
      replaced: r.state === 'done' ? total : replaced,
      total,
      ...(r.finished_at === null ? {} : { finished_at: r.finished_at }),
      ...(r.error === null ? {} : { error: r.error }),
    };
  }

  /** Device ids in use by replicas, by node name. */
  devicesInUse(): Map<string, Set<number>> {
    const out = new Map<string, Set<number>>();
    for (const s of this.#shards) {
      const set = out.get(s.node) ?? new Set<number>();
      for (const d of s.devices) set.add(d);
      out.set(s.node, set);
    }
    return out;
  }

  /** What the gateway routes to: replicas that answer (ready, or degraded but serving), and every model of the catalog. */
  async routeTable(): Promise<RouteTable> {
    if (this.#o.delegate !== undefined) return this.#o.delegate.routeTable();
    const views = this.#o.registry.views();
    const settings = this.#o.settings.current.settings;
    const replicas: RouteReplica[] = [];
    const states = new Map<string, ReplicaOfModel[]>();
    for (const r of this.#replicas) {
      const v = this.#view(r, views);
      const ofModel = states.get(r.model) ?? [];
      ofModel.push(replicaOfModel(v));
      states.set(r.model, ofModel);
      const profile = r.spec.profiles.find((p) => p.name === r.profile);
      const apiKey = this.#engineKey(r);
      if (v.endpoint === undefined || profile === undefined || apiKey === undefined) continue;
      replicas.push(
        routeReplica({
          id: r.id,
          model: r.model,
          profile,
          endpoint: v.endpoint,
          apiKey,
          llamaParallel: settings.agent.engines.llamacpp.parallel,
        }),
      );
    }
    const pending = new Map(this.#pending.map((p) => [p.model, p]));
    const models = (await this.#o.catalog.specs()).map((m) =>
      catalogEntry(m, {
        wanted: this.#o.scaledReplicas?.(m) ?? m.replicas,
        replicas: states.get(m.name) ?? [],
        pending: pending.get(m.name),
      }),
    );
    return { replicas, models, ...(this.#engineCa === undefined ? {} : { ca: this.#engineCa }) };
  }

  /** A shard's log: the last `tail` lines, then (follow) each new one until `signal` aborts. */
  logs(
    id: string,
    options: {
      rank: number;
      tail: number;
      follow: boolean;
      signal: AbortSignal;
      onLines: (lines: string[]) => void;
    },
  ): Promise<void> {
    if (this.#o.delegate !== undefined) return this.#o.delegate.logs(id, options);
    const shard = this.#shards.find((s) => s.replica === id && s.rank === options.rank);
    if (shard === undefined) {
      const exists = this.#replicas.some((r) => r.id === id);
      return Promise.reject(
        new LlmgwError(
          'not_found',
          exists
            ? `replica ${id} has no rank ${options.rank}`
            : `no replica is named "${id}" (llmgw ctl replicas lists them)`,
        ),
      );
    }
    // The engine's log lives on its node: a node that cannot answer now is a conflict with
    // the replica's state (409), not a store that does not answer (503).
    const node = this.#o.registry.views().find((v) => v.name === shard.node);
    if (node === undefined)
      return Promise.reject(
        new LlmgwError(
          'conflict',
          `node ${shard.node}, where replica ${id} runs, is not known to this control plane: its logs cannot be read (llmgw ctl nodes lists the nodes)`,
        ),
      );
    const request = randomUUID();
    return new Promise((resolve, reject) => {
      this.#logRequests.set(request, {
        nodeId: node.id,
        onLines: options.onLines,
        onDone: (error) => (error === undefined ? resolve() : reject(new LlmgwError('conflict', error))),
      });
      const sent = this.#o.hub.send(node.id, {
        type: 'logs',
        request,
        key: `${id}/${options.rank}`,
        tail: options.tail,
        follow: options.follow,
      });
      if (!sent) {
        this.#logRequests.delete(request);
        const elsewhere = this.#reportedTo.get(node.id);
        reject(
          new LlmgwError(
            'conflict',
            elsewhere !== undefined && node.state === 'ready'
              ? `node ${shard.node}'s agent is connected to control plane ${elsewhere}, not this one: read the logs of replica ${id} through that one (llmgw ctl status lists the control planes and their URLs)`
              : `node ${shard.node} is not connected to this control plane, so the logs of replica ${id} cannot be read now: start its agent (llmgw ctl nodes says when it was last seen)`,
          ),
        );
        return;
      }
      options.signal.addEventListener('abort', () => {
        if (!this.#logRequests.has(request)) return;
        this.#logRequests.delete(request);
        this.#o.hub.send(node.id, { type: 'logs_cancel', request });
        resolve();
      });
    });
  }

  /**
   * Asks nodes to fetch a model's files now, ahead of placement (`ctl model pull`): the named
   * ones, else every ready node. Each reports its progress in `downloads` messages.
   */
  pull(model: string, origin: Origin, nodes: readonly string[] = []): PullStarted {
    if (this.#o.delegate !== undefined)
      throw new LlmgwError('not_implemented', this.#o.delegate.refusal('ctl model pull'));
    if (origin.kind === 'path')
      throw new LlmgwError(
        'invalid_argument',
        `model ${model} is read from ${origin.source} on each node, which llmgw does not fetch: put the files at that path on every node`,
      );
    const targets = this.#nodesNamed(nodes, `fetch model ${model}`);
    const total = origin.files.reduce((n, f) => n + f.size, 0);
    for (const v of targets) {
      if (!this.#o.hub.send(v.id, { type: 'pull', model, origin })) continue;
      // Until the node says otherwise: queued, not what it said of an earlier download of these files.
      const others = (this.#downloads.get(v.id) ?? []).filter(
        (d) => !(d.source === origin.source && d.commit === origin.commit),
      );
      this.#downloads.set(v.id, [
        ...others,
        {
          model,
          source: origin.source,
          ...(origin.commit === undefined ? {} : { commit: origin.commit }),
          state: 'queued',
          done: 0,
          total,
          rate_bps: 0,
        },
      ]);
    }
    return {
      model,
      source: origin.source,
      ...(origin.commit === undefined ? {} : { commit: origin.commit }),
      nodes: targets.map((v) => v.name),
    };
  }

  /** Each node's download of a model's files, as last reported (the origin's, whichever model asked). */
  downloads(model: string, origin: Origin): ModelDownloads {
    const names = new Map(this.#o.registry.views().map((v) => [v.id, v.name]));
    const nodes: ModelDownloads['nodes'] = [];
    for (const [nodeId, reports] of this.#downloads) {
      const node = names.get(nodeId);
      if (node === undefined) continue;
      const mine = reports.filter(
        (d) => d.source === origin.source && (origin.commit === undefined || d.commit === origin.commit),
      );
      // One origin may be fetched for several models: the report of this model, else any of them.
      const report = mine.find((d) => d.model === model) ?? mine[0];
      if (report !== undefined) nodes.push({ ...report, model, node });
    }
    nodes.sort((a, b) => a.node.localeCompare(b.node));
    return {
      model,
      source: origin.source,
      ...(origin.commit === undefined ? {} : { commit: origin.commit }),
      nodes,
    };
  }

  /** Every download running on a node now (queued, fetching or verifying), as last reported. */
  activeDownloads(): NodeDownload[] {
    const names = new Map(this.#o.registry.views().map((v) => [v.id, v.name]));
    const out: NodeDownload[] = [];
    for (const [nodeId, reports] of this.#downloads) {
      const node = names.get(nodeId);
      if (node === undefined || !this.#o.registry.isConnected(nodeId)) continue;
      for (const d of reports) if (d.state !== 'done' && d.state !== 'failed') out.push({ ...d, node });
    }
    return out.sort((a, b) => a.node.localeCompare(b.node) || a.model.localeCompare(b.model));
  }

  /** What each node's cache holds (the named one, else every connected node), asked of its agent. */
  async caches(node?: string, timeoutMs = 10_000): Promise<NodeCache[]> {
    if (this.#o.delegate !== undefined)
      throw new LlmgwError('not_implemented', this.#o.delegate.refusal("ctl cache of nodes' model files"));
    const views = this.#o.registry.views();
    const targets =
      node === undefined
        ? views.filter((v) => this.#o.registry.isConnected(v.id))
        : this.#nodesNamed([node], 'list its cache');
    return Promise.all(
      targets.map(
        (v) =>
          new Promise<NodeCache>((resolve) => {
            const request = randomUUID();
            const timer = setTimeout(() => {
              this.#cacheRequests.delete(request);
              resolve({
                node: v.name,
                entries: [],
                error: `node ${v.name} did not answer within ${Math.round(timeoutMs / 1000)} s: its agent may be busy or an older version; llmgw ctl nodes shows it`,
              });
            }, timeoutMs);
            this.#cacheRequests.set(request, {
              nodeId: v.id,
              node: v.name,
              done: (answer) => {
                clearTimeout(timer);
                resolve(answer);
              },
            });
            if (!this.#o.hub.send(v.id, { type: 'cache_list', request })) {
              this.#cacheRequests.delete(request);
              clearTimeout(timer);
              resolve({ node: v.name, entries: [], error: `node ${v.name} is not connected` });
            }
          }),
      ),
    );
  }

  /**
   * Asks every connected node to remove these files of a model (`ctl model rm --purge`). Sent
   * after the model's replicas were taken off the assignments, so that only files another
   * model's engine uses are kept.
   */
  async purge(model: string, origin: Origin): Promise<string[]> {
    // No agent keeps files in Kubernetes mode: a PVC is the operator's, an emptyDir goes with its pod.
    if (this.#o.delegate !== undefined) return [];
    await this.settled();
    const sent: string[] = [];
    for (const v of this.#o.registry.views()) {
      if (this.#o.hub.send(v.id, { type: 'purge', model, origins: [origin] })) sent.push(v.name);
    }
    return sent.sort();
  }

  /** Nodes by name, each known and connected; none named: every ready, connected node. */
  #nodesNamed(names: readonly string[], what: string): NodeView[] {
    const views = this.#o.registry.views();
    if (names.length === 0) {
      const ready = views.filter((v) => v.state === 'ready' && this.#o.registry.isConnected(v.id));
      if (ready.length === 0)
        throw new LlmgwError(
          'conflict',
          `no node is ready to ${what}: start an agent (llmgw ctl nodes lists the nodes and why each is not ready)`,
        );
      return ready;
    }
    return [...new Set(names)].map((name) => {
      const v = views.find((x) => x.name === name);
      if (v === undefined)
        throw new LlmgwError(
          'not_found',
          `no node is named "${clientText(name)}"${didYouMeanSuffix(
            name,
            views.map((x) => x.name),
          )} (llmgw ctl nodes lists them)`,
        );
      if (!this.#o.registry.isConnected(v.id))
        throw new LlmgwError(
          'conflict',
          `node ${name} is not connected to this control plane, so it cannot ${what} now: start its agent, or leave it out`,
        );
      return v;
    });
  }

  #specOf(model: string): ModelSpec | undefined {
    return this.#specs.get(model);
  }

  /** The shards reported unable to listen on their ports, as one string to tell a change. */
  #portsTakenSeen(): string {
    const keys: string[] = [];
    for (const [key, r] of this.#statuses)
      if (r.status.port_taken !== undefined) keys.push(`${key}:${r.status.port_taken.port}`);
    return keys.sort().join(',');
  }

  /**
   * What the agents said of each placed replica, for planning: which are ready, and which must
   * be placed again because a shard's port is another program's (with why). One pass over the
   * shards: placement runs every few seconds over every replica of the cluster.
   */
  #reportedOf(
    shards: readonly Shard[],
    views: readonly NodeView[],
  ): { ready: Set<string>; portTaken: Map<string, string> } {
    const byReplica = new Map<string, Shard[]>();
    for (const s of shards) {
      const list = byReplica.get(s.replica);
      if (list === undefined) byReplica.set(s.replica, [s]);
      else list.push(s);
    }
    const nodeOf = new Map(views.map((v) => [v.name, v]));
    const ready = new Set<string>();
    const portTaken = new Map<string, string>();
    for (const [id, list] of byReplica) {
      if (aggregate(list.map((s) => this.#shardView(s, nodeOf.get(s.node)))).state === 'ready') ready.add(id);
      const why = this.#portTaken(list);
      if (why !== undefined) portTaken.set(id, why);
    }
    return { ready, portTaken };
  }

  /** Why a replica must be placed again because one of its shards' port is another program's; undefined when none is. */
  #portTaken(shards: readonly Shard[]): string | undefined {
    for (const s of shards) {
      const taken = this.#statuses.get(`${s.replica}/${s.rank}`)?.status.port_taken;
      // Only a report about the port the shard has now: an older one may still arrive after it moved.
      if (taken === undefined || taken.port !== s.port) continue;
      const who =
        taken.pid === undefined
          ? 'another program'
          : `another program (pid ${taken.pid}, ${taken.name ?? 'unknown'})`;
      return `port ${s.port} on node ${s.node} is taken by ${who}: placed again on a free port`;
    }
    return undefined;
  }

  #readyReplicas(): number {
    let n = 0;
    for (const r of this.#statuses.values()) if (r.status.state === 'ready') n++;
    return n;
  }

  #shardView(s: Shard, node: NodeView | undefined): ShardView {
    const reported = this.#statuses.get(`${s.replica}/${s.rank}`)?.status;
    const base = {
      rank: s.rank,
      node: s.node,
      devices: s.devices.map(deviceLabel),
      port: s.port,
      ...(s.threads === undefined ? {} : { threads: s.threads }),
    };
    if (node?.state !== 'ready') {
      return {
        ...base,
        state: 'unknown',
        reason: `node ${s.node} is not ready${node?.reason === undefined ? '' : ` (${node.reason})`}`,
        restarts: reported?.restarts ?? 0,
      };
    }
    if (reported === undefined)
      return { ...base, state: 'starting', reason: `waiting for node ${s.node} to start it`, restarts: 0 };
    return {
      ...base,
      state: reported.state,
      ...(reported.reason === undefined ? {} : { reason: reported.reason }),
      ...(reported.restart_at === undefined ? {} : { restart_at: reported.restart_at }),
      ...(reported.download === undefined || reported.state !== 'downloading'
        ? {}
        : { download: reported.download }),
      ...(reported.pid === undefined ? {} : { pid: reported.pid }),
      restarts: reported.restarts,
      ...(reported.ready_since === undefined ? {} : { ready_since: reported.ready_since }),
      ...(reported.last_exit === undefined ? {} : { last_exit: reported.last_exit }),
    };
  }

  #view(r: ReplicaRecord, views: readonly NodeView[]): ReplicaView {
    const shards = this.#shards
      .filter((s) => s.replica === r.id)
      .map((s) =>
        this.#shardView(
          s,
          views.find((v) => v.name === s.node),
        ),
      );
    const { state, reason, download, restart_at } = aggregate(shards);
    const head = this.#shards.find((s) => s.replica === r.id && s.rank === 0);
    const headNode = views.find((v) => v.name === head?.node);
    const profile = r.spec.profiles.find((p) => p.name === r.profile);
    const readySince = shards
      .map((s) => s.ready_since)
      .filter((x): x is string => x !== undefined)
      .sort()
      .at(-1);
    const endpoint =
      head !== undefined && headNode !== undefined && (state === 'ready' || state === 'degraded')
        ? replicaEndpoint({ replica: r.id, host: hostOf(headNode.address), port: head.port, node: headNode })
        : undefined;
    return {
      id: r.id,
      model: r.model,
      profile: r.profile,
      engine: profile?.engine ?? null,
      state,
      ...(reason === undefined ? {} : { reason: r.retiring ? `${reason}; being replaced` : reason }),
      ...(r.retiring && reason === undefined
        ? { reason: `being replaced (${r.retire_reason ?? 'restart'}): it stops once its successor is ready` }
        : {}),
      ...(restart_at === undefined ? {} : { restart_at }),
      ...(download === undefined ? {} : { download }),
      ...(head === undefined ? {} : { node: head.node }),
      ...(readySince === undefined || state !== 'ready' ? {} : { ready_since: readySince }),
      restarts: shards.reduce((n, s) => n + s.restarts, 0),
      ...(endpoint === undefined ? {} : { endpoint }),
      ...(r.retiring ? { retiring: true } : {}),
      created_at: r.created_at,
      shards,
    };
  }

  #pushAll(): void {
    for (const v of this.#o.registry.views()) if (this.#o.registry.isConnected(v.id)) this.#push(v.id);
  }

  /** Tells a node's agent every shard it should run, when that changed (or it just connected). */
  #push(nodeId: string): void {
    const node = this.#o.registry.brief({ id: nodeId });
    if (node === undefined) return;
    const shards: AssignedShard[] = [];
    for (const s of this.#shards.filter((x) => x.node === node.name)) {
      const r = this.#replicas.find((x) => x.id === s.replica);
      const apiKey = r === undefined ? undefined : this.#engineKey(r);
      if (r === undefined || apiKey === undefined) continue;
      const head =
        s.ranks > 1 ? this.#shards.find((x) => x.replica === s.replica && x.rank === 0) : undefined;
      const headNode = head === undefined ? undefined : this.#o.registry.brief({ name: head.node });
      const origin = this.#origins.get(r.spec.source);
      shards.push({
        replica: s.replica,
        model: r.spec,
        profile: s.profile,
        rank: s.rank,
        ranks: s.ranks,
        port: s.port,
        ...(s.dist_port === undefined ? {} : { dist_port: s.dist_port }),
        ...(head?.dist_port !== undefined && headNode !== undefined
          ? { head: { address: hostOf(headNode.address), port: head.dist_port } }
          : {}),
        devices: s.devices,
        ...(s.threads === undefined ? {} : { threads: s.threads }),
        ...(s.memory_mib === undefined ? {} : { memory_mib: s.memory_mib }),
        api_key: apiKey,
        ...(origin === undefined ? {} : { origin }),
      });
    }
    const [first, last] = this.#o.settings.current.settings.placement.ports.split('-').map(Number) as [
      number,
      number,
    ];
    const message = {
      type: 'assign' as const,
      shards,
      engines: this.#engineSettings(),
      ports: { first, last },
      weights: this.#weightsSettings(),
    };
    const text = JSON.stringify(message);
    if (this.#assigned.get(nodeId) === text) return;
    if (this.#o.hub.send(nodeId, message)) this.#assigned.set(nodeId, text);
  }

  /** Where agents fetch model files: the mirror, or the hub itself (then, and only then, with the token). */
  #weightsSettings(): WeightsSettingsWire {
    const settings = this.#o.settings.current.settings;
    let hub: HubAccess = { endpoint: defaultHubEndpoint };
    try {
      hub = this.#o.hubAccess?.() ?? hub;
    } catch (e) {
      // A bad HF_ENDPOINT was refused where models are resolved; agents are told the default here.
      this.#o.logger.warn({ err: messageOf(e) }, 'hub.endpoint could not be read');
    }
    const mirror = settings.mirror.enabled;
    return {
      mirror,
      hub_endpoint: hub.endpoint,
      ...(mirror || hub.token === undefined ? {} : { hub_token: hub.token }),
      catalog_blobs: this.#catalogBlobs,
    };
  }

  #engineSettings(): EngineSettingsWire {
    const a = this.#o.settings.current.settings.agent;
    return { ...a.engines, stop_grace_s: a.stop_grace_s };
  }

  /** What an agent said of its engines (the llama.cpp build, a GPU it does not see). */
  engineReport(nodeId: string): EngineReport | undefined {
    return this.#engines.get(nodeId);
  }
}

/** A node as placement sees it; `heard`: its agent has said what runs there and which ports are taken. */
function placementNode(v: NodeView, o: { portsTaken: readonly PortRange[]; heard: boolean }): PlacementNode {
  return {
    name: v.name,
    ready: v.state === 'ready' && o.heard,
    devices: v.devices,
    excluded: v.excluded,
    cpus: v.host.cpus.count,
    memory_mib: v.host.memory.total_mib,
    address: hostOf(v.address),
    ports_taken: o.portsTaken,
  };
}

/** An IPv4 address as a client dials it: `::ffff:10.0.0.5` is 10.0.0.5; IPv6 in brackets. */
export function hostOf(address: string): string {
  const v4 = address.replace(/^::ffff:/, '');
  if (v4 === '::1') return '127.0.0.1';
  return v4.includes(':') ? `[${v4}]` : v4;
}
