import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';

import { Candidates } from './candidates.js';
import { memoryMibOf, ProfileFit } from './fit.js';
import { keepShards, type KeptReplica } from './keep.js';
import { needOf, poolKey, type Need } from './need.js';
import {
  buildNodes,
  cpuThreadsOn,
  takePort,
  type DeviceList,
  type NodeState,
  type PoolRule,
} from './node-state.js';
import { explainer } from './reasons.js';
import type { ModelMemory, PendingReplica, PlacementInput, PlacementResult, Shard } from './types.js';

/**
 * Places replicas: keeps what runs, stops what is no longer wanted, and adds shards for the
 * replicas missing, or says why they cannot be added.
 *
 * - Models are placed in the order given (their order is their priority when room is short),
 *   each replica on the first of the model's profiles that fits; a successor the caller pins
 *   (input.pinned) only on its predecessor's profile, before the model's other missing ones.
 * - A new replica goes to the nodes with the fewest replicas of its model (spread), then the
 *   node with the least free of what it needs that still fits (best fit keeps big holes for
 *   big replicas), then the first by name.
 * - Existing shards never move. Those removed (and those the caller says are stopping) still
 *   hold their cards, ports, threads and RAM in this pass (their engines are stopping); the
 *   next pass gives them out.
 * - Nothing is freed while placing, so once a replica of a model fits nowhere, no later one
 *   does either: the model's remaining replicas are pending at once.
 * - A model whose shape is known (input.memory) goes only where the memory planner says a
 *   replica fits: onto cards (or a MIG instance) whose memory holds it, and on CPUs with the
 *   RAM it counts reserved. One whose shape is not known is placed by its cards alone.
 *
 * Pure: the same input gives the same output; the only call out is input.newReplicaId, once
 * per replica added.
 */
export function place(input: PlacementInput): PlacementResult {
  const models = new Map<string, ModelSpec>();
  for (const m of input.models) if (!models.has(m.name)) models.set(m.name, m);
  const readiness = new Map<string, boolean>();
  for (const n of input.nodes) if (!readiness.has(n.name)) readiness.set(n.name, n.ready);

  const kept = keepShards(input.shards, models, (node) => readiness.get(node) === true);
  const { states, byName } = buildNodes(
    input.nodes,
    [...input.shards, ...(input.stopping ?? [])],
    input.ports,
  );
  const hosts = hostCounts(kept.replicas, byName);
  const placer = new Placer(input, states, hosts, [...models.values()]);

  const added: Shard[] = [];
  const failed: { model: ModelSpec; pending: PendingReplica }[] = [];
  for (const model of models.values()) {
    const missing = model.replicas - (kept.counts.get(model.name) ?? 0);
    if (missing <= 0) continue;
    const pinned = (input.pinned?.get(model.name) ?? []).slice(0, missing);
    const short = placer.placeModel(model, missing, pinned, added);
    for (const [profile, count] of short.pinned)
      failed.push({ model, pending: { model: model.name, count, profile, reason: '' } });
    if (short.free > 0) failed.push({ model, pending: { model: model.name, count: short.free, reason: '' } });
  }

  // Reasons last, from the final state, and only for what is pending.
  const why = explainer({ states, ports: input.ports, cpuThreads: input.cpuThreads });
  for (const { model, pending } of failed) {
    const plans = placer.plansOf(model.name);
    const reasons = plans
      .filter((p) => pending.profile === undefined || p.profile === pending.profile)
      .map((p) => ({ name: p.profile, text: why(p.need, p.fit) }));
    pending.reason =
      pending.profile !== undefined && plans.length > 1
        ? `profile ${pending.profile}, which the replicas it replaces ran: ${reasons[0]?.text ?? 'not in the model'}`
        : reasons.length === 1
          ? (reasons[0]?.text ?? '')
          : reasons.map((r) => `profile ${r.name}: ${r.text}`).join('; ');
  }

  return {
    shards: [...kept.shards, ...added],
    added,
    remove: kept.remove,
    pending: failed.map((f) => f.pending),
  };
}

/** Replicas of each model per node (by rank), counting a replica once per node it spans. */
function hostCounts(
  replicas: readonly KeptReplica[],
  byName: ReadonlyMap<string, NodeState>,
): Map<string, Map<number, number>> {
  const hosts = new Map<string, Map<number, number>>();
  for (const r of replicas) {
    let counts = hosts.get(r.model);
    if (counts === undefined) {
      counts = new Map();
      hosts.set(r.model, counts);
    }
    const ranks = new Set<number>();
    for (const s of r.shards) {
      const state = byName.get(s.node);
      if (state !== undefined) ranks.add(state.rank);
    }
    for (const rank of ranks) counts.set(rank, (counts.get(rank) ?? 0) + 1);
  }
  return hosts;
}

class Placer {
  readonly #input: PlacementInput;
  readonly #candidates: Candidates;
  readonly #hosts: Map<string, Map<number, number>>;
  /** Hosts of the model being placed. */
  #current = new Map<number, number>();
  /** Each model's profiles as placement reads them, by model name. */
  readonly #plans = new Map<string, Plan[]>();

  constructor(
    input: PlacementInput,
    states: readonly NodeState[],
    hosts: Map<string, Map<number, number>>,
    models: readonly ModelSpec[],
  ) {
    this.#input = input;
    this.#hosts = hosts;
    const cpuThreads = input.cpuThreads;
    // A CPU replica the largest node's RAM cannot hold fits none.
    let ramMib = 0;
    for (const s of states) if (s.node.cpus > 0) ramMib = Math.max(ramMib, s.node.memory_mib);
    for (const m of models) {
      const memory = input.memory?.get(m.name);
      this.#plans.set(
        m.name,
        m.profiles.map((p) => planOf(m, p, memory, ramMib)),
      );
    }
    // CPU nodes stay candidates while they could take the smallest CPU shard any model asks for.
    let minCpuMemory = Infinity;
    for (const plans of this.#plans.values()) {
      for (const { need } of plans) {
        if (need.kind === 'cpu') minCpuMemory = Math.min(minCpuMemory, need.memoryMib);
      }
    }
    this.#candidates = new Candidates(states, (key) => {
      if (key === 'cpu') {
        const rule: PoolRule = {
          measure: (slot) => slot.node.threadsFree,
          open: ({ node: s }) =>
            s.freePorts >= 1 && s.threadsFree >= cpuThreadsOn(s, cpuThreads) && s.memoryFree >= minCpuMemory,
        };
        return { rule, member: (s) => (s.node.ready && s.node.cpus > 0 ? { list: undefined } : undefined) };
      }
      const lists = deviceLists(key);
      const rule: PoolRule = {
        measure: (slot) => slot.list?.free.length ?? 0,
        open: (slot) => slot.node.freePorts >= 1 && (slot.list?.free.length ?? 0) >= 1,
      };
      return {
        rule,
        member: (s) => {
          const list = lists(s);
          return s.node.ready && list !== undefined ? { list } : undefined;
        },
      };
    });
  }

  /** A model's profiles as placement read them (for reasons). */
  plansOf(model: string): readonly Plan[] {
    return this.#plans.get(model) ?? [];
  }

  /**
   * Adds up to `missing` replicas of a model to `out`, those `pinned` first, each on its own
   * profile only; says how many it could not place: pinned ones by profile, and the rest.
   */
  placeModel(
    model: ModelSpec,
    missing: number,
    pinned: readonly string[],
    out: Shard[],
  ): { pinned: Map<string, number>; free: number } {
    let hosts = this.#hosts.get(model.name);
    if (hosts === undefined) {
      hosts = new Map();
      this.#hosts.set(model.name, hosts);
    }
    this.#current = hosts;
    const plans = this.plansOf(model.name);
    const short = { pinned: new Map<string, number>(), free: 0 };
    this.#candidates.begin(hosts);
    try {
      for (const profile of pinned) {
        const plan = plans.find((p) => p.profile === profile);
        const shards = plan === undefined ? undefined : this.#tryPlan(model.name, plan);
        if (shards === undefined) short.pinned.set(profile, (short.pinned.get(profile) ?? 0) + 1);
        else for (const s of shards) out.push(s);
      }
      for (let i = pinned.length; i < missing; i++) {
        let shards: Shard[] | undefined;
        for (const plan of plans) {
          shards = this.#tryPlan(model.name, plan);
          if (shards !== undefined) break;
        }
        if (shards === undefined) {
          short.free = missing - i;
          break;
        }
        for (const s of shards) out.push(s);
      }
    } finally {
      this.#candidates.end();
    }
    return short;
  }

  /** One replica on this profile, unless it failed already this pass (nothing is freed while placing). */
  #tryPlan(model: string, plan: Plan): Shard[] | undefined {
    if (plan.failed) return undefined;
    const shards = this.#placeReplica(model, plan);
    if (shards === undefined) plan.failed = true;
    return shards;
  }

  #placeReplica(model: string, plan: Plan): Shard[] | undefined {
    const need = plan.need;
    switch (need.kind) {
      case 'refused':
        return undefined;
      case 'cpu':
        return this.#placeCpu(model, plan.profile, need.memoryMib);
      case 'instance':
      case 'cards':
        return this.#placeGpu(model, plan);
    }
  }

  #placeGpu(model: string, { profile, key, perNode, nodes, takes, takesHead }: Plan): Shard[] | undefined {
    const c = this.#candidates;
    const head = c.best(key, perNode, nodes > 1 ? takesHead : takes);
    if (head === undefined) return undefined;
    const chosen = [head];
    if (nodes > 1) {
      c.detach(head);
      while (chosen.length < nodes) {
        const next = c.best(key, perNode, takes);
        if (next === undefined) break;
        c.detach(next);
        chosen.push(next);
      }
      if (chosen.length < nodes) {
        for (const slot of chosen) c.reseat(slot.node);
        return undefined;
      }
    }
    const replica = this.#input.newReplicaId(model);
    return chosen.map((slot, rank) => {
      const state = slot.node;
      const devices = slot.list?.free.splice(0, perNode) ?? [];
      const port = takePort(state);
      const shard: Shard = {
        replica,
        model,
        profile,
        rank,
        ranks: nodes,
        node: state.node.name,
        devices,
        port,
      };
      if (rank === 0 && nodes > 1) shard.dist_port = takePort(state);
      this.#hosted(state);
      return shard;
    });
  }

  #placeCpu(model: string, profile: string, memoryMib: number): Shard[] | undefined {
    const setting = this.#input.cpuThreads;
    const slot = this.#candidates.best('cpu', setting > 0 ? setting : 1, (s) => s.memoryFree >= memoryMib);
    if (slot === undefined) return undefined;
    const state = slot.node;
    const threads = cpuThreadsOn(state, setting);
    state.threadsFree -= threads;
    state.memoryFree -= memoryMib;
    const port = takePort(state);
    this.#hosted(state);
    const replica = this.#input.newReplicaId(model);
    return [
      {
        replica,
        model,
        profile,
        rank: 0,
        ranks: 1,
        node: state.node.name,
        devices: [],
        port,
        threads,
        memory_mib: memoryMib,
      },
    ];
  }

  /** A node took a replica of the current model: count it, and move the node's slots. */
  #hosted(state: NodeState): void {
    this.#current.set(state.rank, (this.#current.get(state.rank) ?? 0) + 1);
    this.#candidates.reseat(state);
  }
}

/** A profile read once per pass: what a replica of it takes, and from which pool. */
interface Plan {
  profile: string;
  need: Need;
  key: string;
  /** GPU profiles: cards (or one instance) on each of `nodes` nodes. */
  perNode: number;
  nodes: number;
  /** The memory planner's view of it, when the model's shape is known. */
  fit: ProfileFit | undefined;
  /** GPU profiles: whether a node can take a shard (a free port, devices that hold it), and a head (two ports). */
  takes: (s: NodeState) => boolean;
  takesHead: (s: NodeState) => boolean;
  /** Nothing is freed while placing: once a replica of it fits nowhere, none will this pass. */
  failed: boolean;
}

function planOf(model: ModelSpec, p: ProfileSpec, memory: ModelMemory | undefined, ramMib: number): Plan {
  let need = needOf(p);
  const fit =
    memory === undefined || need.kind === 'refused'
      ? undefined
      : new ProfileFit({ model: model.name, memory, profile: p, context: model.context_length });
  if (fit !== undefined && need.kind === 'cpu') need = cpuNeed(need.memoryMib, fit, ramMib);
  const key = need.kind === 'refused' ? '' : poolKey(need);
  const perNode = need.kind === 'cards' ? need.perNode : 1;
  const nodes = need.kind === 'cards' ? need.nodes : 1;
  // Made once per pass: devices too small for a replica do not count, however many are free.
  let takes = onePort;
  let takesHead = twoPorts;
  if (fit !== undefined && (need.kind === 'cards' || need.kind === 'instance')) {
    const { cls } = need;
    const holds =
      need.kind === 'cards'
        ? (s: NodeState) => {
            const list = s.cards.get(cls);
            return list !== undefined && fit.fits(memoryMibOf(list));
          }
        : (s: NodeState) => {
            const list = s.instances.get(cls);
            return list !== undefined && fit.fits(memoryMibOf(list));
          };
    takes = (s) => s.freePorts >= 1 && holds(s);
    takesHead = (s) => s.freePorts >= 2 && holds(s);
  }
  return { profile: p.name, need, key, perNode, nodes, fit, takes, takesHead, failed: false };
}

/**
 * A CPU replica reserves the RAM the planner counts (weights, KV cache, compute) when that is
 * more than its profile's min_memory_gb; one that not even the largest node's RAM holds is
 * refused with the planner's reason.
 */
function cpuNeed(memoryMib: number, fit: ProfileFit, ramMib: number): Need {
  if (ramMib <= 0) return { kind: 'cpu', memoryMib };
  if (!fit.fits(ramMib)) {
    return { kind: 'refused', reason: fit.explained(ramMib).reason ?? "does not fit in any node's RAM" };
  }
  return { kind: 'cpu', memoryMib: Math.max(memoryMib, fit.ramMib(ramMib) ?? 0) };
}

const onePort = (s: NodeState) => s.freePorts >= 1;
const twoPorts = (s: NodeState) => s.freePorts >= 2;

/** Reads a GPU pool's key: which of a node's device lists it draws from. */
function deviceLists(key: string): (s: NodeState) => DeviceList | undefined {
  if (key.startsWith('card:')) {
    const cls = key.slice('card:'.length);
    return (s) => s.cards.get(cls);
  }
  const cls = key.slice('mig:'.length);
  return (s) => s.instances.get(cls);
}
