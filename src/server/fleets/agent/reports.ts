import type { PortRange, Shard } from '../../../placement/types.js';
import { maxPortRanges, type EngineReport, type ShardStatusWire } from '../../../protocol/agent-protocol.js';
import type { NodeView } from '../../../protocol/node-views.js';
import type { EventPublisher } from '../../events/event-hub.js';
import { publishStatuses, statusChanges } from '../../events/fleet-changes.js';

import { aggregate } from './aggregate.js';
import type { Placed } from './placed.js';
import type { ReplicaViews } from './replica-views.js';

/** What an agent last said of its shards, as control planes share it through the store. */
export interface ShardReport {
  statuses: ShardStatusWire[];
  engines?: EngineReport | undefined;
  ports_taken?: [number, number][] | undefined;
}

interface Reported {
  nodeId: string;
  status: ShardStatusWire;
}

/**
 * What the agents say of their shards: each shard's status, the ports other programs hold,
 * why an engine last failed. Placement reads it; a report that changes what placement would
 * do (a replica ready during a roll, a failure, a port taken) pokes it.
 */
export class AgentReports {
  readonly #placed: Placed;
  readonly #events: EventPublisher | undefined;
  readonly #poke: () => void;
  readonly #statuses = new Map<string, Reported>();
  /** Ports other programs listen on, by node id, as its agent last said. */
  readonly #portsTaken = new Map<string, PortRange[]>();
  /**
   * Nodes connected here whose agent has reported since it connected: only those take new
   * shards, so that none is placed on a port the node would have said is taken.
   */
  readonly #heard = new Set<string>();
  /** Why each replica's engine last failed, as its agent said (a failed shard soon starts again). */
  readonly #failures = new Map<string, string>();
  /** The engines each node's agent installs, as it last said (which binary runs, and why), by node id. */
  readonly #engines = new Map<string, EngineReport>();

  constructor(o: { placed: Placed; events?: EventPublisher | undefined; poke: () => void }) {
    this.#placed = o.placed;
    this.#events = o.events;
    this.#poke = o.poke;
  }

  status(key: string): ShardStatusWire | undefined {
    return this.#statuses.get(key)?.status;
  }

  /** What a node's agent last said of the engines it installs; undefined before it said. */
  engines(nodeId: string): EngineReport | undefined {
    return this.#engines.get(nodeId);
  }

  /** Whether the node's agent reported since it connected here. */
  heard(nodeId: string): boolean {
    return this.#heard.has(nodeId);
  }

  /** Its agent (re)connected or left: it is heard again only once it reports. */
  unheard(nodeId: string): void {
    this.#heard.delete(nodeId);
  }

  portsTaken(nodeId: string): readonly PortRange[] {
    return this.#portsTaken.get(nodeId) ?? [];
  }

  /** A report of a node connected here: the first since it connected lets it take new shards. */
  fromAgent(nodeId: string, report: ShardReport): void {
    const first = !this.#heard.has(nodeId);
    this.#heard.add(nodeId);
    this.ingest(nodeId, report, first);
  }

  /** What a node's agent said of its shards (to this control plane or, through the store, to another). */
  ingest(nodeId: string, m: ShardReport, firstReport: boolean): void {
    const before = this.#readyCount();
    const statusesBefore = new Map(this.#statuses);
    for (const [key, r] of this.#statuses) if (r.nodeId === nodeId) this.#statuses.delete(key);
    if (m.engines !== undefined) this.#engines.set(nodeId, m.engines);
    const portsBefore = this.#portsTakenSeen();
    let failedRolling = false;
    for (const s of m.statuses) {
      this.#statuses.set(s.key, { nodeId, status: s });
      if (s.state !== 'failed' || s.port_taken !== undefined) continue;
      // The agent starts a failed engine again soon: what it said now is kept for the rollout.
      this.#failures.set(s.replica, (s.reason ?? 'its engine failed').replace(/; restarting in [^;]*$/, ''));
      const model = this.#placed.replica(s.replica)?.model;
      if (model !== undefined && this.#placed.rollouts.get(model)?.state === 'rolling') failedRolling = true;
    }
    if (m.ports_taken !== undefined)
      this.#portsTaken.set(
        nodeId,
        m.ports_taken.slice(0, maxPortRanges).map(([first, last]) => ({ first, last })),
      );
    // A replica that became ready may let a replaced one stop, or a roll go on; a failed one ends a roll.
    const placed = this.#placed;
    const rolling = [...placed.rollouts.values()].some((r) => r.state === 'rolling');
    if (this.#events !== undefined)
      publishStatuses(this.#events, statusChanges(statusesBefore, this.#statuses), placed.view());
    if (
      failedRolling ||
      (this.#readyCount() !== before && (rolling || placed.replicas.some((r) => r.retiring)))
    )
      this.#poke();
    // A node heard from for the first time takes new shards; a shard whose port another program took is placed again.
    else if (firstReport || this.#portsTakenSeen() !== portsBefore) this.#poke();
  }

  /** Forgets what was said of shards and replicas no longer placed. */
  keep(shards: ReadonlySet<string>, replicas: ReadonlySet<string>): void {
    for (const key of this.#statuses.keys()) if (!shards.has(key)) this.#statuses.delete(key);
    for (const id of this.#failures.keys()) if (!replicas.has(id)) this.#failures.delete(id);
  }

  /**
   * Why a replica's engine failed, in its own words: the last failure its agent reported (an
   * exit with its last error line, files that could not be fetched), else its last exit.
   * Undefined for one that has not failed; a port another program took is no failure of it.
   */
  failure(id: string): string | undefined {
    const seen = this.#failures.get(id);
    if (seen !== undefined) return seen;
    for (const s of this.#placed.shards.filter((x) => x.replica === id)) {
      const exit = this.status(`${s.replica}/${s.rank}`)?.last_exit;
      if (exit === undefined) continue;
      const how =
        exit.signal === null ? `exited with code ${exit.code ?? '?'}` : `was killed by ${exit.signal}`;
      const line = exit.log_tail.findLast((l) => /error/i.test(l));
      return `its engine ${how}${line === undefined ? '' : `; its last error line: ${line.trim().slice(0, 300)}`}`;
    }
    return undefined;
  }

  /**
   * What the agents said of each placed replica, for planning: which are ready, and which must
   * be placed again because a shard's port is another program's (with why). One pass over the
   * shards: placement runs every few seconds over every replica of the cluster.
   */
  reportedOf(
    shards: readonly Shard[],
    nodes: readonly NodeView[],
    views: ReplicaViews,
  ): { ready: Set<string>; portTaken: Map<string, string> } {
    const byReplica = new Map<string, Shard[]>();
    for (const s of shards) {
      const list = byReplica.get(s.replica);
      if (list === undefined) byReplica.set(s.replica, [s]);
      else list.push(s);
    }
    const nodeOf = new Map(nodes.map((v) => [v.name, v]));
    const ready = new Set<string>();
    const portTaken = new Map<string, string>();
    for (const [id, list] of byReplica) {
      if (aggregate(list.map((s) => views.shardView(s, nodeOf.get(s.node)))).state === 'ready') ready.add(id);
      const why = this.#portTaken(list);
      if (why !== undefined) portTaken.set(id, why);
    }
    return { ready, portTaken };
  }

  /** Why a replica must be placed again because one of its shards' port is another program's; undefined when none is. */
  #portTaken(shards: readonly Shard[]): string | undefined {
    for (const s of shards) {
      const taken = this.status(`${s.replica}/${s.rank}`)?.port_taken;
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

  /** The shards reported unable to listen on their ports, as one string to tell a change. */
  #portsTakenSeen(): string {
    const keys: string[] = [];
    for (const [key, r] of this.#statuses)
      if (r.status.port_taken !== undefined) keys.push(`${key}:${r.status.port_taken.port}`);
    return keys.sort().join(',');
  }

  #readyCount(): number {
    let n = 0;
    for (const r of this.#statuses.values()) if (r.status.state === 'ready') n++;
    return n;
  }
}
