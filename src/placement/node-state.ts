import type { Device } from '../gpu/types.js';

import type { HeapItem, RankHeap } from './rank-heap.js';
import type { PlacementNode, PortRange, Shard } from './types.js';

export type { PortRange } from './types.js';

/** A node's devices of one class and kind (whole cards, or MIG instances). */
export interface DeviceList {
  readonly devices: Device[];
  /** Ids of the devices no shard uses, ascending: new shards take the lowest. */
  readonly free: number[];
}

/** What placement knows of one node while it places: what is left, after kept and new shards. */
export interface NodeState {
  /** Position in name order: the tie-break of every choice. */
  readonly rank: number;
  readonly node: PlacementNode;
  /** Whole cards by class. */
  readonly cards: Map<string, DeviceList>;
  /** MIG instances by class. */
  readonly instances: Map<string, DeviceList>;
  /** Ports in the range that kept shards, or other programs on the node, hold. */
  readonly heldPorts: Set<number>;
  /** Where the search for the lowest free port starts: every port below it is taken. */
  nextPort: number;
  freePorts: number;
  threadsFree: number;
  memoryFree: number;
  /** Its slots in the pools made so far. */
  readonly slots: Slot[];
}

/** How one pool reads a node: what orders it, and whether it can take anything at all. */
export interface PoolRule {
  /** Free amount of what the pool hands out (devices of a class, CPU threads): best fit takes the least. */
  measure(slot: Slot): number;
  /** Whether the node can take any shard of this pool; once false it stays false (nothing is freed). */
  open(slot: Slot): boolean;
}

/** A node's place in one pool; `rank` is the node's (name order). */
export interface Slot extends HeapItem {
  readonly node: NodeState;
  readonly pool: Pool;
  /** The node's devices of the pool's class, held here so the hot path does no lookups. */
  readonly list: DeviceList | undefined;
  /** The bucket it sits in: level (replicas of the model being placed) and free amount. */
  level: number;
  bucket: number;
}

export interface Pool {
  readonly rule: PoolRule;
  readonly slots: Map<number, Slot>;
  /** levels[k][b]: open nodes with k replicas of the model being placed and b free. */
  readonly levels: (RankHeap<Slot> | undefined)[][];
  readonly sizes: number[];
  /** Whether its nodes are levelled by the current model's replica counts (else all sit at level 0). */
  levelled: boolean;
}

/**
 * Node states in name order, with what existing shards use already subtracted: those being
 * removed too, as a scheduler counts a terminating pod until it is gone, since their engines
 * still hold the cards and ports while they stop. The next pass, without them, frees both.
 */
export function buildNodes(
  nodes: readonly PlacementNode[],
  shards: readonly Shard[],
  ports: PortRange,
): { states: NodeState[]; byName: Map<string, NodeState> } {
  const unique = new Map<string, PlacementNode>();
  for (const n of nodes) if (!unique.has(n.name)) unique.set(n.name, n);
  const sorted = [...unique.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  const states: NodeState[] = sorted.map((node, rank) => ({
    rank,
    node,
    cards: new Map(),
    instances: new Map(),
    heldPorts: new Set(),
    nextPort: ports.first,
    freePorts: 0,
    threadsFree: node.cpus,
    memoryFree: node.memory_mib,
    slots: [],
  }));
  const byName = new Map(states.map((s) => [s.node.name, s]));

  const used = new Map<NodeState, Set<number>>();
  for (const s of shards) {
    const state = byName.get(s.node);
    if (state === undefined) continue;
    if (s.devices.length > 0) {
      let ids = used.get(state);
      if (ids === undefined) {
        ids = new Set();
        used.set(state, ids);
      }
      for (const id of s.devices) ids.add(id);
    }
    for (const p of [s.port, s.dist_port]) {
      if (p !== undefined && p >= ports.first && p <= ports.last) state.heldPorts.add(p);
    }
    state.threadsFree -= s.threads ?? 0;
    state.memoryFree -= s.memory_mib ?? 0;
  }

  // Ports other programs listen on are held as shards' are: never handed out.
  for (const state of states) {
    for (const r of state.node.ports_taken ?? []) {
      const last = Math.min(r.last, ports.last);
      for (let p = Math.max(r.first, ports.first); p <= last; p++) state.heldPorts.add(p);
    }
  }

  const rangeSize = Math.max(0, ports.last - ports.first + 1);
  for (const state of states) {
    state.freePorts = rangeSize - state.heldPorts.size;
    const ids = used.get(state);
    const given = state.node.devices;
    const devices = given.every((d, i) => i === 0 || (given[i - 1]?.id ?? -Infinity) <= d.id)
      ? given
      : [...given].sort((a, b) => a.id - b.id);
    let last: number | undefined;
    for (const d of devices) {
      // A device listed twice is one device.
      if (d.id === last) continue;
      last = d.id;
      const lists = d.mig === undefined ? state.cards : state.instances;
      let list = lists.get(d.class);
      if (list === undefined) {
        list = { devices: [], free: [] };
        lists.set(d.class, list);
      }
      list.devices.push(d);
      if (ids?.has(d.id) !== true) list.free.push(d.id);
    }
  }
  return { states, byName };
}

/** Takes the lowest port no shard on the node holds. Call only when freePorts > 0. */
export function takePort(state: NodeState): number {
  let p = state.nextPort;
  while (state.heldPorts.has(p)) p++;
  state.nextPort = p + 1;
  state.freePorts--;
  return p;
}

/** Threads a CPU shard reserves on a node: the setting, or half its CPUs (llama.cpp would take all). */
export function cpuThreadsOn(state: NodeState, setting: number): number {
  return setting > 0 ? setting : Math.max(1, Math.floor(state.node.cpus / 2));
}
