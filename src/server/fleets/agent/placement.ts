import type { Logger } from 'pino';

import type { ModelSpec } from '../../../catalog/model-spec.js';
import type { PendingReplica, Shard } from '../../../placement/types.js';
import {
  LeaseLost,
  type FleetChange,
  type ReplicaRecord,
  type RolloutRecord,
  type Store,
} from '../../../store/store.js';
import { systemActor } from '../../state/admin-key.js';
import type { LeaderView } from '../../cluster/leadership.js';
import type { EventPublisher } from '../../events/event-hub.js';
import { publishPlacement } from '../../events/fleet-changes.js';

import { planFleet, type NewReplica } from './fleet-plan.js';
import { planInput, resolvedSpecs, type PlanSources } from './placement-input.js';
import { rolloutProgress } from './rollout-progress.js';

/** How long a follower waits for the leader to place after a change made through it (restart, roll). */
const leaderPassMs = 5000;
/** How often a follower reads the placement again without a notification (one may be lost). */
const followerResyncMs = 30_000;

/** A placement, this control plane's or the leader's as read back. */
interface Placement {
  pending: PendingReplica[];
  replicas: ReplicaRecord[];
  shards: Shard[];
  rollouts: Map<string, RolloutRecord>;
}

export interface PlacementPassOptions {
  store: Store;
  logger: Logger;
  sources: PlanSources;
  leader?: LeaderView | undefined;
  events?: EventPublisher | undefined;
  controlPlaneId?: string | undefined;
  /** Several control planes share the store: the leader's placement is told and read back. */
  shared: boolean;
  /** A placement was taken: the agents connected here are told what their nodes should run. */
  taken: () => void;
}

/**
 * Placement passes: the leader places (a pure plan over the catalog, the nodes and the shards
 * already placed) and writes the result under the store's lock, fenced so that a leader that
 * lost its lease writes nothing; every other control plane reads what the leader wrote.
 */
export class PlacementPasses {
  readonly #o: PlacementPassOptions;
  /** The pending list as last written for the other control planes. */
  #pendingShared = '';
  /** When this control plane last read the leader's placement. */
  #followedAt = 0;
  /** Followers waiting for the leader's next placement. */
  #leaderPassed: (() => void)[] = [];

  constructor(o: PlacementPassOptions) {
    this.#o = o;
  }

  get leads(): boolean {
    return this.#o.leader?.leads() ?? true;
  }

  /** Whether a follower's copy of the placement is old enough to read again without a notification. */
  get stale(): boolean {
    return Date.now() - this.#followedAt >= followerResyncMs;
  }

  /** The leader placed (a notification from another control plane): followers waiting go on. */
  leaderPassed(): void {
    for (const done of this.#leaderPassed.splice(0)) done();
  }

  async reconcile(): Promise<void> {
    if (!this.leads) return this.#follow();
    try {
      await this.#lead();
    } catch (e) {
      if (!(e instanceof LeaseLost)) throw e;
      this.#o.leader?.lost(e.message);
      await this.#follow();
    }
  }

  /**
   * Places now, after a change made through this control plane (a restart, a roll): here when
   * it leads; else the leader is woken and its placement awaited (for a few seconds at most),
   * then read.
   */
  async placeNow(): Promise<void> {
    if (this.leads || !this.#o.shared) return this.reconcile();
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

  async #lead(): Promise<void> {
    const now = Date.now();
    const { sources, store, logger } = this.#o;
    const resolved = await resolvedSpecs(sources);
    const { specs, unresolved } = resolved;
    const fence = this.#o.leader?.fence();
    if (this.#o.leader !== undefined && fence === undefined)
      throw new LeaseLost('this control plane no longer holds the leader lease');

    const result = await store.fleet.locked(async (tx) => {
      if (fence !== undefined) await tx.cluster.checkFence(fence);
      const input = await planInput(sources, tx, resolved, now);
      const { ready } = input;
      const plan = planFleet(input);
      for (const r of plan.retire) await tx.fleet.retire(r.id, r.reason, systemActor);
      const add = await this.#named(tx, plan.add);
      if (add.length > 0 || plan.remove.length > 0)
        await tx.fleet.apply({ add, remove: plan.remove }, systemActor);
      for (const r of plan.retire) logger.info({ replica: r.id, reason: r.reason }, 'replica to be replaced');
      for (const r of plan.remove) logger.info({ replica: r.id, reason: r.reason }, 'replica removed');
      for (const a of add)
        logger.info({ replica: a.replica.id, nodes: a.shards.map((s) => s.node) }, 'replica placed');
      const after = await tx.fleet.replicas();
      const { rollouts, ended } = await this.#endRollouts(tx, specs, after, ready);
      const pending = [...plan.pending, ...unresolved];
      if (this.#o.shared) {
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
    const { specs } = await resolvedSpecs(this.#o.sources);
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
  #take(result: Placement, specs: readonly ModelSpec[]): void {
    const { placed, reports, keys } = this.#o.sources;
    const before = placed.view();
    placed.rollouts = result.rollouts;
    placed.pending = result.pending;
    placed.specs = new Map(specs.map((s) => [s.name, s]));
    placed.replicas = result.replicas;
    placed.shards = result.shards;
    const live = new Set(placed.replicas.map((r) => r.id));
    reports.keep(new Set(placed.shards.map((s) => `${s.replica}/${s.rank}`)), live);
    keys.keep(live);
    this.#o.taken();
    if (this.#o.events !== undefined) publishPlacement(this.#o.events, before, placed.view());
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
        failure: (id) => this.#o.sources.reports.failure(id),
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
        out.push({
          replica: {
            id,
            model,
            profile: a.profile,
            created_at: createdAt,
            sealed_key: this.#o.sources.keys.make(id),
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
}
