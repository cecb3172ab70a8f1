import type { ModelSpec } from '../catalog/model-spec.js';
import type { Device, ExcludedCard } from '../gpu/types.js';
import type { ModelShape } from '../models/shape.js';

/**
 * Placement is a pure function: the models and how many replicas each wants, the nodes
 * and their devices, and the shards already placed, in; the shards to keep and add, and
 * what could not be placed with the reason why, out. It never moves an existing shard.
 */

export interface PlacementNode {
  name: string;
  /** Not-ready nodes get no new shards (their existing ones are the caller's to handle). */
  ready: boolean;
  devices: Device[];
  excluded: ExcludedCard[];
  cpus: number;
  memory_mib: number;
  /** Addresses other nodes reach this one at (multi-node replicas' head address). */
  address: string;
  /**
   * Ports other programs listen on there (its agent's report): never handed out, as an
   * engine placed on one could not listen. Absent: none known.
   */
  ports_taken?: readonly PortRange[];
}

/** Ports from first to last, inclusive. */
export interface PortRange {
  first: number;
  last: number;
}

/** One process group of one replica on one node. */
export interface Shard {
  replica: string;
  model: string;
  profile: string;
  rank: number;
  ranks: number;
  node: string;
  /** Device ids (devices.ts numbering); empty for a CPU shard. */
  devices: number[];
  /** The API port (each shard gets one, unique on its node). */
  port: number;
  /** Rank 0 of a multi-node replica: the port the other ranks join at. */
  dist_port?: number;
  /** CPU shards: threads and RAM reserved on the node. */
  threads?: number;
  memory_mib?: number;
}

export interface PendingReplica {
  model: string;
  /** How many replicas of the model wait for room. */
  count: number;
  /** Set when they must run this profile (input.pinned): successors of replicas of it. */
  profile?: string;
  /** In words a user acts on: `no ready node has 2 free a100-80g cards (node-a: 1 free, node-b: MIG mode, no whole cards)`. */
  reason: string;
}

export interface PlacementInput {
  models: readonly ModelSpec[];
  nodes: readonly PlacementNode[];
  /** Shards placed before: kept as they are, unless their model scaled down or went away. */
  shards: readonly Shard[];
  /**
   * Shards of replicas the caller is stopping: not kept, but their cards, ports, threads and
   * RAM stay taken in this pass, as those of `remove` do, since their engines still hold them.
   */
  stopping?: readonly Shard[];
  /** Ports engines may listen on, inclusive. */
  ports: PortRange;
  /** Threads a CPU shard reserves when its profile does not say; 0 = half the node's CPUs. */
  cpuThreads: number;
  /** Makes replica ids; injected so results are reproducible in tests. */
  newReplicaId: (model: string) => string;
  /**
   * What the memory planner needs of each model whose shape is known, by name: a profile of
   * one is then placed only where a replica fits its cards (or RAM), as its engine budgets
   * memory. A model missing here is placed by its cards alone, claiming no memory.
   */
  memory?: ReadonlyMap<string, ModelMemory>;
  /**
   * Profiles some of a model's missing replicas must run, one entry per replica, by model
   * name: a successor of a replica being replaced runs its predecessor's profile, never the
   * next one that fits, so that a change of one profile does not move its replicas onto
   * another (a CPU fallback). One that does not fit is pending with its profile named.
   */
  pinned?: ReadonlyMap<string, readonly string[]>;
}

/** A model's shape and files (its source resolved), as the planner reads them. */
export interface ModelMemory {
  shape: ModelShape;
  /** The source's files, for the weights' bytes where the shape does not hold them. */
  files?: readonly { path: string; size: number }[] | undefined;
  /** The engine's version where known (vLLM's defaults changed at 0.21); else the newest's. */
  engineVersion?: string | undefined;
}

export interface PlacementResult {
  /** Every shard that should run: those kept and those added. */
  shards: Shard[];
  /** The shards added (also in `shards`), with the ids newReplicaId gave their replicas. */
  added: Shard[];
  /** Shards of replicas that should stop (model removed or scaled down). */
  remove: Shard[];
  pending: PendingReplica[];
}
