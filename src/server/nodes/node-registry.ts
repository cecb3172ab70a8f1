import type { Logger } from 'pino';

import { devicesOf } from '../../gpu/devices.js';
import type { NodeInventory } from '../../gpu/types.js';
import { withTelemetry, type Telemetry } from '../../protocol/agent-protocol.js';
import type { ClusterStatus, NodeState, NodeView } from '../../protocol/node-views.js';
import type { NodeRecord, Store } from '../../store/store.js';

export interface NodeRegistryOptions {
  store: Store;
  logger: Logger;
  /** How often agents send a heartbeat. */
  heartbeatMs: number;
  /** Heartbeats missed before a node is not ready. */
  missedBeats?: number;
  now?: () => number;
}

interface Entry {
  record: NodeRecord;
  inventory: NodeInventory;
  lastSeen: number;
  /** Connected to this control plane now. */
  connected: boolean;
  disconnectReason?: string;
  state: NodeState;
  /** Heard from since the last flush to the store. */
  dirty: boolean;
}

export type NodeListener = (name: string, state: NodeState) => void;

/**
 * The control plane's live view of its nodes: inventories, telemetry and liveness, in
 * memory. The store keeps inventories and when each node was last seen (flushed every
 * few heartbeats, not on every one), so a restarted control plane, or another one on the
 * same database, knows the nodes before their agents reconnect.
 */
export class NodeRegistry {
  readonly #o: Required<Omit<NodeRegistryOptions, 'now'>> & { now: () => number };
  readonly #nodes = new Map<string, Entry>();
  readonly #listeners: NodeListener[] = [];
  readonly #reportListeners: ((name: string) => void)[] = [];
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  #lastFlush = 0;
  #lastReload = 0;
  #usage: () => Map<string, Set<number>> = () => new Map();
  /** Nodes without an agent, read elsewhere (Kubernetes mode's nodes): shown read-only beside the others. */
  #external: () => NodeView[] = () => [];
  /**
   * When this control plane began to listen for its nodes. A node's silence is only held
   * against it from then on: while the control plane was down it could not hear anyone.
   */
  readonly upSince: number;

  constructor(options: NodeRegistryOptions) {
    this.#o = { missedBeats: 3, now: Date.now, ...options };
    this.upSince = this.#o.now();
  }

  /** The grace after which a silent node is not ready. */
  get graceMs(): number {
    return this.#o.heartbeatMs * this.#o.missedBeats;
  }

  async start(): Promise<void> {
    await this.#reload();
    this.#timer = setInterval(() => this.sweep(), Math.min(1000, this.#o.heartbeatMs));
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.flush();
  }

  /** Which devices replicas use, by node name (the fleet's placement). */
  setUsage(usage: () => Map<string, Set<number>>): void {
    this.#usage = usage;
  }

  /** Nodes known without an agent (Kubernetes mode): their views, each with its devices in use. */
  setExternal(views: () => NodeView[]): void {
    this.#external = views;
  }

  /** Whether a node is one of those (it is removed from its cluster, not from llmgw). */
  isExternal(name: string): boolean {
    return this.#external().some((v) => v.name === name);
  }

  onStateChange(listener: NodeListener): void {
    this.#listeners.push(listener);
  }

  /** A node reported (an inventory, a heartbeat's telemetry), by name: for GET /events. */
  onReport(listener: (name: string) => void): void {
    this.#reportListeners.push(listener);
  }

  /** A node's agent is connected (its record is in the store). */
  connected(record: NodeRecord): void {
    const now = this.#o.now();
    const previous = this.#nodes.get(record.id);
    this.#nodes.set(record.id, {
      record,
      inventory: record.inventory,
      lastSeen: now,
      connected: true,
      state: previous?.state ?? 'not_ready',
      dirty: false,
    });
    // A node still ready (back within its grace, as after a control plane restart) changes
    // nothing: a thousand such reconnections must not each set placement running.
    if (previous?.state !== 'ready') this.#transition(record.id, 'ready');
  }

  disconnected(id: string, why: string): void {
    const e = this.#nodes.get(id);
    if (e === undefined) return;
    e.connected = false;
    e.disconnectReason = why;
  }

  forget(id: string): void {
    this.#nodes.delete(id);
  }

  /** A new inventory: the machine changed (or the agent restarted). Written to the store. */
  async inventory(id: string, inventory: NodeInventory): Promise<void> {
    const e = this.#nodes.get(id);
    if (e === undefined) return;
    e.inventory = inventory;
    this.#seen(e);
    for (const l of this.#reportListeners) l(e.record.name);
    await this.#o.store.nodes.updateInventory(id, inventory, new Date(this.#o.now()).toISOString());
  }

  heartbeat(id: string, telemetry: Telemetry): void {
    const e = this.#nodes.get(id);
    if (e === undefined) return;
    e.inventory = withTelemetry(e.inventory, telemetry);
    this.#seen(e);
    for (const l of this.#reportListeners) l(e.record.name);
  }

  /** Marks silent nodes not ready, and ready ones that were heard from again. */
  sweep(): void {
    const now = this.#o.now();
    for (const [id, e] of this.#nodes) {
      const state: NodeState = now - e.lastSeen <= this.#graceOf(e) ? 'ready' : 'not_ready';
      if (state !== e.state) this.#transition(id, state);
    }
    if (now - this.#lastFlush >= this.graceMs / 2) void this.flush();
    if (now - this.#lastReload >= this.graceMs / 2)
      void this.#reload().catch((err: unknown) =>
        this.#o.logger.warn({ err }, 'could not reload nodes from the store'),
      );
  }

  /** Writes when each node was last seen; one transaction for all of them. */
  flush(): Promise<void> {
    this.#lastFlush = this.#o.now();
    const seen = [...this.#nodes.values()].filter((e) => e.dirty);
    if (seen.length === 0) return this.#flushing;
    for (const e of seen) e.dirty = false;
    const rows = seen.map((e) => ({ id: e.record.id, at: new Date(e.lastSeen).toISOString() }));
    this.#flushing = this.#flushing
      .then(() => this.#o.store.nodes.touch(rows))
      .catch((err: unknown) => this.#o.logger.warn({ err }, 'could not record when nodes were last seen'));
    return this.#flushing;
  }

  /**
   * A node's name and address, by id or by name, without building its view: the fleet asks
   * for every node it sends to, and views() of a thousand nodes for each would be quadratic.
   */
  brief(by: { id: string } | { name: string }): { id: string; name: string; address: string } | undefined {
    const e =
      'id' in by ? this.#nodes.get(by.id) : [...this.#nodes.values()].find((x) => x.record.name === by.name);
    return e === undefined
      ? undefined
      : { id: e.record.id, name: e.record.name, address: e.inventory.address ?? e.record.address };
  }

  isConnected(id: string): boolean {
    return this.#nodes.get(id)?.connected === true;
  }

  views(): NodeView[] {
    return [...[...this.#nodes.values()].map((e) => this.#view(e)), ...this.#external()].sort((a, b) =>
      a.name.localeCompare(b.name),
    );
  }

  view(name: string): NodeView | undefined {
    const e = [...this.#nodes.values()].find((x) => x.record.name === name);
    return e === undefined ? this.#external().find((v) => v.name === name) : this.#view(e);
  }

  status(): ClusterStatus {
    const views = this.views();
    const classes = new Map<string, { total: number; used: number; other: number }>();
    const usage = this.#usage();
    const external = new Set(this.#external().map((v) => v.name));
    let cpus = 0;
    let total = 0;
    let free = 0;
    for (const v of views) {
      cpus += v.host.cpus.count;
      total += v.host.memory.total_mib;
      free += v.host.memory.free_mib;
      const inUse = usage.get(v.name);
      // An external node says how many of each class its pods use, not which devices.
      const usedLeft = external.has(v.name) ? { ...v.devices_in_use_by_class } : {};
      for (const d of v.devices) {
        const c = classes.get(d.class) ?? { total: 0, used: 0, other: 0 };
        c.total++;
        const left = usedLeft[d.class] ?? 0;
        if (left > 0) {
          usedLeft[d.class] = left - 1;
          c.used++;
        } else if (inUse?.has(d.id) === true) c.used++;
        else if (d.processes.length > 0) c.other++;
        classes.set(d.class, c);
      }
    }
    return {
      nodes: {
        total: views.length,
        ready: views.filter((v) => v.state === 'ready').length,
        not_ready: views.filter((v) => v.state !== 'ready').length,
      },
      devices: [...classes.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([cls, c]) => ({
          class: cls,
          total: c.total,
          used: c.used,
          free: c.total - c.used,
          other_processes: c.other,
        })),
      excluded: views.flatMap((v) =>
        v.excluded.map((x) => ({ node: v.name, card: x.card, reason: x.reason })),
      ),
      cpus,
      memory_mib: { total, free },
    };
  }

  #seen(e: Entry): void {
    e.lastSeen = this.#o.now();
    e.dirty = true;
    if (e.state !== 'ready') this.#transition(e.record.id, 'ready');
  }

  #transition(id: string, state: NodeState): void {
    const e = this.#nodes.get(id);
    if (e === undefined) return;
    e.state = state;
    const name = e.record.name;
    if (state === 'ready') this.#o.logger.info({ node: name }, 'node ready');
    else
      this.#o.logger.warn(
        { node: name, lastSeen: new Date(e.lastSeen).toISOString(), reason: this.#reason(e) },
        'node not ready',
      );
    for (const l of this.#listeners) l(name, state);
  }

  /**
   * How long a node may be silent here. One whose agent talks to another control plane is
   * heard of through the store, late by up to that one's flush (grace/2) and this one's
   * reload (grace/2): held to twice the grace, or the leader would see it flap not ready.
   */
  #graceOf(e: Entry): number {
    return e.connected || e.disconnectReason !== undefined ? this.graceMs : 2 * this.graceMs;
  }

  #reason(e: Entry): string {
    const since = new Date(e.lastSeen).toISOString();
    const why = e.connected
      ? 'its agent stopped sending heartbeats'
      : (e.disconnectReason ?? 'its agent is not connected');
    return `no heartbeat since ${since}: ${why}`;
  }

  #view(e: Entry): NodeView {
    const inv = e.inventory;
    const { devices, excluded } = devicesOf(inv.gpu.cards);
    const byClass: Record<string, number> = {};
    const usedByClass: Record<string, number> = {};
    const inUse = this.#usage().get(e.record.name);
    for (const d of devices) {
      byClass[d.class] = (byClass[d.class] ?? 0) + 1;
      if (inUse?.has(d.id) === true) usedByClass[d.class] = (usedByClass[d.class] ?? 0) + 1;
    }
    return {
      id: e.record.id,
      name: e.record.name,
      state: e.state,
      ...(e.state === 'ready' ? {} : { reason: this.#reason(e) }),
      last_seen: new Date(e.lastSeen).toISOString(),
      address: inv.address ?? e.record.address,
      ...(inv.engine_proxy === undefined ? {} : { engine_proxy: inv.engine_proxy }),
      agent_version: inv.agent_version,
      joined_at: e.record.joined_at,
      host: inv.host,
      discovery: { method: inv.gpu.method, reasons: inv.gpu.reasons },
      ...(inv.gpu.driver_version === undefined ? {} : { driver_version: inv.gpu.driver_version }),
      ...(inv.gpu.cuda_version === undefined ? {} : { cuda_version: inv.gpu.cuda_version }),
      devices,
      excluded,
      devices_by_class: byClass,
      devices_in_use_by_class: usedByClass,
    };
  }

  /** Reads the nodes again now: another control plane said one joined, left or was removed. */
  refresh(): Promise<void> {
    return this.#reload();
  }

  /** Nodes from the store: all of them at start; later, those not connected here (another control plane's). */
  async #reload(): Promise<void> {
    this.#lastReload = this.#o.now();
    const records = await this.#o.store.nodes.list();
    const ids = new Set(records.map((r) => r.id));
    for (const r of records) {
      const e = this.#nodes.get(r.id);
      if (e?.connected === true) continue;
      const lastSeen = Date.parse(r.last_seen_at);
      if (e === undefined) {
        const state: NodeState = this.#o.now() - lastSeen <= 2 * this.graceMs ? 'ready' : 'not_ready';
        this.#nodes.set(r.id, {
          record: r,
          inventory: r.inventory,
          lastSeen,
          connected: false,
          state,
          dirty: false,
        });
      } else {
        e.record = r;
        if (lastSeen > e.lastSeen) {
          e.lastSeen = lastSeen;
          e.inventory = r.inventory;
        }
      }
    }
    for (const [id, e] of this.#nodes) if (!ids.has(id) && !e.connected) this.#nodes.delete(id);
  }
}
