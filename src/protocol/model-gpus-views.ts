import type { EngineName } from '../catalog/model-spec.js';

import type { RolloutView } from './rollout-views.js';

/** How the API answers `POST /api/v1/models/{name}/gpus`; shared by the server and its clients. */

/** A profile on one count of cards, and what the planner says each card needs (GiB = 2^30, of the fullest card). */
export interface GpusSideView {
  /** Cards of one node a replica uses (gpus_per_node). */
  cards: number;
  tp: number;
  pp: number;
  /** Null where the model's shape or the card's memory is not known. */
  need_gib: number | null;
  budget_gib: number | null;
  /** Null when not checked. */
  fits: boolean | null;
  max_context: number | null;
  /** Why it does not fit, in the planner's words; null when it fits or was not checked. */
  reason: string | null;
}

export interface GpusProfileView {
  profile: string;
  engine: EngineName;
  class: string;
  before: GpusSideView;
  after: GpusSideView;
  /** Arguments left out of the profile: a layer split for the old count, a parallel size the profile now says. */
  dropped_args: string[];
}

export interface ModelGpusView {
  model: string;
  /** The profiles changed (one). */
  profiles: GpusProfileView[];
  /** The replicas starting again on the new cards. */
  rollout: RolloutView;
  /** What could not be checked, said once; null when everything was. */
  note: string | null;
}

/**
 * The answer to the same request with `dry_run: true`: what the change would be, checked (room
 * on the profile for its replicas included); nothing stored or restarted. `restarted`: how
 * many of the model's replicas it would start again.
 */
export type ModelGpusCheck = Omit<ModelGpusView, 'rollout'> & { dry_run: true; restarted: number };
