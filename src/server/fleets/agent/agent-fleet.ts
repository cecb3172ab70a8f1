import type { Logger } from 'pino';

import type { ModelSpec } from '../../../catalog/model-spec.js';
import { LlmgwError, messageOf } from '../../../core/errors.js';
import type { HubAccess } from '../../../models/hub.js';
import type { Origin } from '../../../models/origin.js';
import type { AgentMessage } from '../../../protocol/agent-protocol.js';
import type { ModelDownloads, NodeCache, NodeDownload, PullStarted } from '../../../protocol/cache-views.js';
import type { ReplicaView, RestartResult } from '../../../protocol/replica-views.js';
import type { RollOptions, RolloutView } from '../../../protocol/rollout-views.js';
import type { RouteTable } from '../../../protocol/routes.js';
import type { Store } from '../../../store/store.js';
import type { Catalog } from '../../state/catalog.js';
import type { LeaderView } from '../../cluster/leadership.js';
import type { EventPublisher } from '../../events/event-hub.js';
import type { AgentHub, HubListener } from '../../nodes/agent-hub.js';
import type { NodeRegistry } from '../../nodes/node-registry.js';
import type { SettingsHolder } from '../../state/settings-holder.js';
import type { EngineKeys } from '../engine-keys.js';
import type { Fleet, LogOptions } from '../fleet.js';
import { Passes } from '../passes.js';

import { Assignments } from './assignments.js';
import { LogRelay } from './log-relay.js';
import { NodeFiles } from './node-files.js';
import type { PlanSources } from './placement-input.js';
import { PlacementPasses } from './placement.js';
import { Placed } from './placed.js';
import { ReplicaKeys } from './replica-keys.js';
import { ReplicaViews } from './replica-views.js';
import { ReportSharing } from './report-sharing.js';
import { AgentReports, type ShardReport } from './reports.js';
import { agentRouteTable } from './route-table.js';
import { Rollouts } from './rollouts.js';

export interface AgentFleetOptions {
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
  /** The cluster CA the nodes' engine forwarders' certificates chain to (TLS on): gateways verify them with it. */
  engineCa?: () => string | undefined;
}

/**
 * Replicas on llmgw's agents: places each model's replicas onto nodes (a pure function over
 * the catalog, the nodes and the shards already placed), keeps that placement in the store
 * under a cluster-wide lock, tells each agent what its node should run, and collects what the
 * agents report. Placement is persisted, so a restarted control plane computes the same
 * assignment and no engine restarts. Each job is a part of its own; this class joins them.
 */
export class AgentFleet implements Fleet, HubListener {
  readonly #o: AgentFleetOptions;
  readonly #placed = new Placed();
  readonly #reports: AgentReports;
  readonly #sharing: ReportSharing;
  readonly #views: ReplicaViews;
  readonly #keys: ReplicaKeys;
  readonly #sources: PlanSources;
  readonly #placement: PlacementPasses;
  readonly #passes: Passes;
  readonly #assignments: Assignments;
  readonly #rollouts: Rollouts;
  readonly #logs: LogRelay;
  readonly #files: NodeFiles;
  readonly #unlisten: (() => void)[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(o: AgentFleetOptions) {
    this.#o = o;
    const { store, registry, hub, logger, events } = o;
    const placed = this.#placed;
    this.#reports = new AgentReports({ placed, events, poke: () => this.poke() });
    const reports = this.#reports;
    this.#sharing = new ReportSharing({ store, registry, reports, logger, controlPlaneId: o.controlPlaneId });
    this.#views = new ReplicaViews({
      placed,
      registry,
      statusOf: (key) => reports.status(key),
      enginesOf: (nodeId) => reports.engines(nodeId),
    });
    this.#keys = new ReplicaKeys({ keys: o.keys, logger });
    this.#sources = {
      catalog: o.catalog,
      registry,
      settings: o.settings,
      placed,
      reports,
      views: this.#views,
      keys: this.#keys,
      scaledReplicas: o.scaledReplicas,
    };
    this.#assignments = new Assignments({ ...this.#sources, hub, logger, hubAccess: o.hubAccess });
    this.#placement = new PlacementPasses({
      store,
      logger,
      sources: this.#sources,
      leader: o.leader,
      events,
      controlPlaneId: o.controlPlaneId,
      shared: this.#shared,
      taken: () => this.#assignments.pushAll(),
    });
    this.#passes = new Passes({
      pass: () => this.#placement.reconcile(),
      failed: (e) => logger.error({ err: messageOf(e) }, 'placement failed'),
      paced: true,
    });
    this.#rollouts = new Rollouts({
      store,
      sources: this.#sources,
      placement: this.#placement,
      passes: this.#passes,
    });
    this.#logs = new LogRelay({ placed, registry, hub, reportedTo: (id) => this.#sharing.reportedTo(id) });
    this.#files = new NodeFiles({ registry, hub, placed, events, settled: () => this.settled() });
  }

  /** Several control planes may share this store (PostgreSQL): reports are shared and wake-ups heard. */
  get #shared(): boolean {
    return this.#o.store.dialect === 'postgres' && this.#o.controlPlaneId !== undefined;
  }

  get leads(): boolean {
    return this.#placement.leads;
  }

  async start(): Promise<void> {
    const { hub, registry, store, leader } = this.#o;
    hub.listen(this);
    registry.onStateChange(() => this.poke());
    registry.setUsage(() => this.#devicesInUse());
    leader?.onChange(() => this.poke());
    if (this.#shared) {
      const me = this.#o.controlPlaneId;
      this.#unlisten.push(
        // Another control plane's placement: what runs where changed.
        store.cluster.listen('fleet', (from) => {
          if (from === me) return;
          this.#placement.leaderPassed();
          this.poke();
        }),
        // A change made through another control plane's API: the leader places it.
        store.cluster.listen('models', (from) => {
          if (from !== me) this.poke();
        }),
        store.cluster.listen('reports', (payload) => void this.#sharing.load(payload)),
      );
      await this.#sharing.load('');
    }
    await this.reconcile();
    // The leader places on this beat too (a node lost past its grace); a follower is woken by the
    // leader's notifications and reads the store again only now and then, should one be lost.
    this.#timer = setInterval(() => {
      if (this.leads || !this.#shared || this.#placement.stale) this.poke();
    }, this.#o.intervalMs ?? 5000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    for (const u of this.#unlisten.splice(0)) u();
    this.#placement.leaderPassed();
    await this.#passes.stop();
    await this.#sharing.flush();
  }

  poke(): void {
    this.#passes.poke();
  }

  /**
   * The leader places and writes the result; every other control plane reads what the leader
   * wrote. Either way the agents connected here are told what their nodes should run.
   */
  reconcile(): Promise<void> {
    return this.#placement.reconcile();
  }

  settled(): Promise<void> {
    return this.#passes.settled();
  }

  // HubListener

  connected(nodeId: string): void {
    this.#assignments.forget(nodeId);
    this.#reports.unheard(nodeId);
    this.#assignments.push(nodeId);
  }

  disconnected(nodeId: string): void {
    this.#assignments.forget(nodeId);
    this.#reports.unheard(nodeId);
    this.#logs.nodeGone(nodeId);
    this.#files.nodeGone(nodeId);
  }

  inventory(): void {
    this.poke();
  }

  message(nodeId: string, m: Exclude<AgentMessage, { type: 'inventory' | 'heartbeat' }>): void {
    switch (m.type) {
      case 'shards': {
        const report: ShardReport = { statuses: m.statuses, engines: m.engines, ports_taken: m.ports_taken };
        this.#reports.fromAgent(nodeId, report);
        if (this.#shared) this.#sharing.share(nodeId, report);
        return;
      }
      case 'downloads':
        this.#files.reported(nodeId, m.downloads);
        return;
      case 'cache':
        this.#files.answer(nodeId, m);
        return;
      case 'log_lines':
        this.#logs.answer(m);
    }
  }

  // Views and control

  replicas(model?: string): ReplicaView[] {
    return this.#views.replicas(model);
  }

  replica(id: string): ReplicaView {
    return this.#views.replica(id);
  }

  restart(id: string, inPlace: boolean, actor: string): Promise<RestartResult> {
    return this.#rollouts.restart(id, inPlace, actor);
  }

  checkRoll(model: string, next: ModelSpec, o: Pick<RollOptions, 'inPlace'>): Promise<number> {
    return this.#rollouts.checkRoll(model, next, o);
  }

  rollModel(
    model: string,
    next: ModelSpec,
    o: RollOptions,
    write: () => Promise<void>,
  ): Promise<RolloutView> {
    return this.#rollouts.rollModel(model, next, o, write);
  }

  /** Agents run the engines here: there is nothing Kubernetes would be given. */
  manifests(): Promise<Record<string, unknown>[]> {
    return Promise.reject(
      new LlmgwError(
        'precondition_failed',
        'this control plane runs engines on its node agents and writes no Kubernetes objects: add a kubernetes section to its settings to run engines as Kubernetes pods (docs/kubernetes.md)',
      ),
    );
  }

  rollout(model: string): Promise<RolloutView | undefined> {
    return this.#rollouts.rollout(model);
  }

  routeTable(): Promise<RouteTable> {
    return agentRouteTable({ ...this.#sources, engineCa: this.#o.engineCa });
  }

  logs(id: string, options: LogOptions): Promise<void> {
    return this.#logs.logs(id, options);
  }

  pull(model: string, origin: Origin, nodes: readonly string[] = []): PullStarted {
    return this.#files.pull(model, origin, nodes);
  }

  downloads(model: string, origin: Origin): ModelDownloads {
    return this.#files.downloads(model, origin);
  }

  activeDownloads(): NodeDownload[] {
    return this.#files.activeDownloads();
  }

  caches(node?: string, timeoutMs?: number): Promise<NodeCache[]> {
    return this.#files.caches(node, timeoutMs);
  }

  purge(model: string, origin: Origin): Promise<string[]> {
    return this.#files.purge(model, origin);
  }

  /** Device ids in use by replicas, by node name (the node registry shows them). */
  #devicesInUse(): Map<string, Set<number>> {
    const out = new Map<string, Set<number>>();
    for (const s of this.#placed.shards) {
      const set = out.get(s.node) ?? new Set<number>();
      for (const d of s.devices) set.add(d);
      out.set(s.node, set);
    }
    return out;
  }
}
