export { place } from './place.js';
export type {
  PendingReplica,
  PlacementInput,
  PlacementNode,
  PlacementResult,
  PortRange,
  Shard,
} from './types.js';
