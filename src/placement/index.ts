export { place } from './place.js';
export type {
  ModelMemory,
  PendingReplica,
  PlacementInput,
  PlacementNode,
  PlacementResult,
  PortRange,
  Shard,
} from './types.js';
