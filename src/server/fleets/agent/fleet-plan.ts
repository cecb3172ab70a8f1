import { isDeepStrictEqual } from 'node:util';

import type { ModelSpec } from '../../../catalog/model-spec.js';
import { naturalCompare } from '../../../placement/keep.js';
import { place } from '../../../placement/place.js';
import type { ModelMemory, PendingReplica, PlacementNode, Shard } from '../../../placement/types.js';
import type { ReplicaRecord, RolloutRecord } from '../../../store/store.js';

import { retirable } from './retirement.js';

/** A stored replica, as planning reads it. */
export type PlanReplica = Pick<
  ReplicaRecord,
  'id' | 'model' | 'profile' | 'created_at' | 'spec' | 'retiring' | 'retire_reason' | 'retiring_since'
>;

/** A model's latest rollout, as planning reads it. */
export type PlanRollout = Pick<RolloutRecord, 'mode' | 'state' | 'spec'> &
  Partial<Pick<RolloutRecord, 'profiles'>>;

export interface PlanNode {
  node: PlacementNode;
  /** When it was last heard from, in ms since the epoch. */
  lastSeen: number;
}

export interface FleetPlanInput {
  /** The catalog, in placement priority order. */
  specs: readonly ModelSpec[];
  /** What the memory planner needs of the models whose shape is known (placement's input.memory). */
  memory?: ReadonlyMap<string, ModelMemory>;
  replicas: readonly PlanReplica[];
  shards: readonly Shard[];
  nodes: readonly PlanNode[];
  /** Replicas whose shards are all ready. */
  ready: ReadonlySet<string>;
  /** Replicas whose stored engine keys this control plane cannot open: replaced, as the gateway cannot reach them. */
  unkeyed?: ReadonlySet<string>;
  /** Replicas an agent reported unable to listen where placed (another program holds the port), with why: placed again. */
  portTaken?: ReadonlyMap<string, string>;
  now: number;
  /** When this control plane started: a node's silence before then is not held against it. */
  upSince: number;
  /** placement.node_lost_after_s. */
  lostAfterS: number;
  /**
   * The longest an agent takes to reconnect (its backoff's cap): a node not heard from
   * since this control plane started gets at least this long, however short lostAfterS.
   */
  reconnectS: number;
  ports: { first: number; last: number };
  cpuThreads: number;
  /** Each model's latest rollout, by model name: how its replicas roll, and whether that halted. */
  rollouts?: ReadonlyMap<string, PlanRollout>;
}

/** A replica to add; the caller names it, and gives that id to its shards. */
export interface NewReplica {
  model: string;
  profile: string;
  spec: ModelSpec;
  shards: Omit<Shard, 'replica'>[];
}

export interface Change {
  id: string;
  reason: string;
}

export interface FleetPlan {
  /** Replicas to mark as being replaced: each stops once a successor of its model is ready. */
  retire: Change[];
  remove: Change[];
  add: NewReplica[];
  pending: PendingReplica[];
}

/**
 * What the fleet does next, from what is stored and what the nodes say. Pure: the same
 * input gives the same plan.
 *
 * - A replica on a node that was removed, or that has been silent for `lostAfterS` while
 *   this control plane was up to hear it (and, if not heard since it started, for as long
 *   as an agent may take to reconnect), goes and is placed again elsewhere; so does one of
 *   a model that left the catalog, one whose engine key cannot be opened, and one whose
 *   engine cannot listen where it was placed (another program holds its port).
 * - A model scaled down loses its extra replicas, the least useful first: one on a node
 *   that is not ready, one that is not ready, one that runs an older spec, the newest.
 *   A model scaled up gains replicas. Neither touches the replicas that stay.
 * - A replica being replaced stops once a successor is ready (retirement.ts).
 * - A replica whose engine would now start differently (runsAsSpecified) is replaced, one
 *   replica of a model at a time: it is marked, a successor is placed beside it, and it
 *   stops once that one is ready. While the model's rollout (of this change) is in place,
 *   the replica is removed instead, the next one only once the model has as many ready
 *   replicas as it wants and every replica running the change is ready: never more than
 *   one of the model down. A failed rollout halts: nothing more is marked or removed for
 *   it, and the old replicas keep serving.
 * - New replicas are placed (placement/place.ts) next to those kept, each replica being
 *   replaced counting on top so that its successor finds room beside it. A successor runs
 *   its predecessor's profile (pinned), never the next profile that fits: beside a replica
 *   being replaced, and in place where the rollout's start says what each profile ran.
 */
export function planFleet(input: FleetPlanInput): FleetPlan {
  const specs = new Map<string, ModelSpec>();
  for (const s of input.specs) if (!specs.has(s.name)) specs.set(s.name, s);
  const nodes = new Map<string, PlanNode>();
  for (const n of input.nodes) if (!nodes.has(n.node.name)) nodes.set(n.node.name, n);
  const shardsOf = groupBy(input.shards, (s) => s.replica);
  const replicasOf = groupBy(input.replicas, (r) => r.model);

  const remove: Change[] = [];
  const removed = new Set<string>();
  const drop = (id: string, reason: string) => {
    if (removed.has(id)) return;
    removed.add(id);
    remove.push({ id, reason });
  };
  const live = (model: string) => (replicasOf.get(model) ?? []).filter((r) => !removed.has(r.id));

  /** The grace a node was given and used up, in s; undefined while it has some left. */
  const lostAfter = (name: string): number | undefined => {
    const n = nodes.get(name);
    if (n === undefined || n.node.ready) return undefined;
    const heardSinceStart = n.lastSeen >= input.upSince;
    const grace = heardSinceStart ? input.lostAfterS : Math.max(input.lostAfterS, input.reconnectS);
    return input.now - Math.max(n.lastSeen, input.upSince) > grace * 1000 ? grace : undefined;
  };
  for (const r of input.replicas) {
    const where = (shardsOf.get(r.id) ?? []).map((s) => s.node);
    const gone = where.find((n) => !nodes.has(n));
    const silent = where.find((n) => lostAfter(n) !== undefined);
    if (gone !== undefined) drop(r.id, `node ${gone} was removed`);
    else if (silent !== undefined)
      drop(r.id, `node ${silent} was not ready for ${lostAfter(silent) ?? input.lostAfterS} s`);
    else if (!specs.has(r.model)) drop(r.id, 'model removed');
    else if (input.unkeyed?.has(r.id) === true)
      drop(r.id, "its engine key cannot be opened with this control plane's secret");
    else if (input.portTaken?.has(r.id) === true)
      drop(r.id, input.portTaken.get(r.id) ?? 'its port is taken');
  }

  const onReadyNodes = (r: PlanReplica) =>
    (shardsOf.get(r.id) ?? []).every((s) => nodes.get(s.node)?.node.ready === true);
  for (const spec of specs.values()) {
    const active = live(spec.name).filter((r) => !r.retiring);
    const excess = active.length - spec.replicas;
    if (excess <= 0) continue;
    const rank = (r: PlanReplica) =>
      [onReadyNodes(r), input.ready.has(r.id), runsAsSpecified(r, spec)].map(Number);
    const order = active
      .map((r) => ({ r, rank: rank(r) }))
      .sort((a, b) => compareRanks(a.rank, b.rank) || naturalCompare(b.r.id, a.r.id));
    for (const { r } of order.slice(0, excess)) drop(r.id, 'scaled down');
  }

  for (const spec of specs.values()) {
    for (const r of retirable(
      live(spec.name),
      (id) => input.ready.has(id),
      () => spec.replicas,
    ))
      drop(r.id, r.retire_reason ?? 'replaced');
  }

  const retire: Change[] = [];
  // Each replica being replaced counts on top of what its model wants, so that its successor is placed beside it.
  const replacing = new Map<string, number>();
  for (const spec of specs.values()) {
    const mine = live(spec.name);
    const marked = mine.filter((r) => r.retiring).length;
    replacing.set(spec.name, marked);
    const roll = input.rollouts?.get(spec.name);
    const current = roll !== undefined && rollsTo(roll, spec) ? roll : undefined;
    if (current?.state === 'failed') continue;
    const stale = mine.sort(byAge).filter((r) => !runsAsSpecified(r, spec));
    if (marked > 0) {
      // A successor of an earlier change that never came up (its engine fails) stands in the
      // way of the one being replaced: it goes, so that a successor of this change is placed.
      for (const r of stale)
        if (!r.retiring && onReadyNodes(r) && !input.ready.has(r.id))
          drop(r.id, 'the model changed again before it was ready');
      continue;
    }
    if (stale.length === 0) continue;
    if (current?.state === 'rolling' && current.mode === 'in-place') {
      const down = (r: PlanReplica) => !input.ready.has(r.id);
      const missing = spec.replicas - mine.filter((r) => !down(r)).length;
      const starting = mine.some((r) => down(r) && runsAsSpecified(r, spec));
      // One that does not serve anyway goes first: stopping it takes nothing away.
      const next = stale.find(down) ?? stale[0];
      if (next !== undefined && (down(next) || (missing <= 0 && !starting)))
        drop(next.id, 'the model changed (in place)');
      continue;
    }
    const [oldest] = stale;
    if (oldest === undefined) continue;
    retire.push({ id: oldest.id, reason: 'the model changed' });
    replacing.set(spec.name, 1);
  }

  const retiring = new Set(retire.map((c) => c.id));
  const pinned = new Map<string, string[]>();
  for (const spec of specs.values()) {
    const roll = input.rollouts?.get(spec.name);
    const current = roll !== undefined && rollsTo(roll, spec) ? roll : undefined;
    const pins = successorProfiles(
      spec,
      live(spec.name).map((r) => ({ profile: r.profile, retiring: r.retiring || retiring.has(r.id) })),
      current?.state === 'rolling' && current.mode === 'in-place' ? current.profiles : undefined,
    );
    if (pins.length > 0) pinned.set(spec.name, pins);
  }

  const keptIds = new Set(input.replicas.filter((r) => !removed.has(r.id)).map((r) => r.id));
  let next = 0;
  const placed = place({
    models: [...specs.values()].map((s) => ({ ...s, replicas: s.replicas + (replacing.get(s.name) ?? 0) })),
    nodes: input.nodes.map((n) => n.node),
    shards: input.shards.filter((s) => keptIds.has(s.replica)),
    stopping: input.shards.filter((s) => removed.has(s.replica)),
    ports: input.ports,
    cpuThreads: input.cpuThreads,
    // Only told apart among the shards added, never looked up among stored replicas.
    newReplicaId: () => String(next++),
    memory: input.memory,
    pinned,
  });

  const add: NewReplica[] = [];
  for (const list of groupBy(placed.added, (s) => s.replica).values()) {
    const spec = specs.get(list[0]?.model ?? '');
    if (spec === undefined || list[0] === undefined) continue;
    add.push({
      model: spec.name,
      profile: list[0].profile,
      spec,
      shards: list.map(({ replica: _placeholder, ...s }) => s),
    });
  }
  return { retire, remove, add, pending: placed.pending };
}

/**
 * The profiles a model's successors must run, one per successor owed: each replica being
 * replaced beside its successor wants one on its own profile; an in-place roll (`started`:
 * each profile's replicas when it began) wants back each profile's replicas it stopped. A
 * profile the model no longer has pins nothing: its successors go where they fit.
 */
export function successorProfiles(
  spec: Pick<ModelSpec, 'profiles'>,
  replicas: readonly { profile: string; retiring: boolean }[],
  started: Readonly<Record<string, number>> | undefined,
): string[] {
  const pins: string[] = [];
  for (const { name } of spec.profiles) {
    const on = replicas.filter((r) => r.profile === name);
    const beside = on.filter((r) => r.retiring).length;
    const inPlace = Math.max(0, (started?.[name] ?? 0) - on.length);
    for (let i = 0; i < beside + inPlace; i++) pins.push(name);
  }
  return pins;
}

/**
 * Whether a replica runs what its model now says: the model as its engine is started from
 * it, that is all of it but the replica count and the model's other profiles. A replica
 * whose profile left the model does not.
 */
export function runsAsSpecified(r: Pick<PlanReplica, 'spec' | 'profile'>, spec: ModelSpec): boolean {
  return isDeepStrictEqual(runOf(r.spec, r.profile), runOf(spec, r.profile));
}

/**
 * Whether a rollout is of the change the model is at now: the model it rolls to, all but the
 * replica count (a model scaled during a roll goes on rolling). A model changed again since
 * (`ctl model apply`, the settings file) is another change.
 */
export function rollsTo(rollout: Pick<RolloutRecord, 'spec'>, spec: ModelSpec): boolean {
  // Nor its autoscale bounds: neither changes how an engine runs.
  const { replicas: _a, autoscale: _c, ...to } = rollout.spec;
  const { replicas: _b, autoscale: _d, ...now } = spec;
  return isDeepStrictEqual(JSON.parse(JSON.stringify(to)), JSON.parse(JSON.stringify(now)));
}

function runOf(spec: ModelSpec, profile: string): unknown {
  const { replicas: _count, autoscale: _scale, profiles, ...model } = spec;
  // Through JSON: an absent key and one set to undefined are the same, key order is not a change.
  return JSON.parse(
    JSON.stringify({ ...model, profile: profiles.find((p) => p.name === profile) ?? null }),
  ) as unknown;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list === undefined) out.set(k, [item]);
    else list.push(item);
  }
  return out;
}

function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function byAge(a: PlanReplica, b: PlanReplica): number {
  return a.created_at.localeCompare(b.created_at) || naturalCompare(a.id, b.id);
}
