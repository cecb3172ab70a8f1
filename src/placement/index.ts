export { place } from './place.js';
export type { PendingReplica, PlacementInput, PlacementNode, PlacementResult, Shard } from './types.js';
