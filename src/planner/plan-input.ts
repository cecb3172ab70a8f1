import type { ModelShape } from '../models/shape.js';
import type { PlanEngine } from './plan-engine.js';
import type { ModelDims, PlanDevice, PlanProfile, WeightLayout } from './types.js';

/** What the planner is asked: a model's shape on one profile and device. */
export interface PlanInput {
  /** The engines the profile's may be (the registry's): the planner names none itself. */
  engines: readonly PlanEngine[];
  shape: ModelShape;
  /** The weights' bytes where the shape does not know them (the files' sizes). */
  weightBytes?: number | undefined;
  /** The repository's files, for the weights' bytes where neither of the above is known. */
  files?: readonly { path: string; size: number }[] | undefined;
  layout?: WeightLayout | undefined;
  dims?: ModelDims | undefined;
  profile: PlanProfile;
  device: PlanDevice;
  /**
   * Cards of one node a replica uses: llama.cpp's layer split, tensor parallel (× the profile's
   * pp where it divides) for the others. Default: the profile's.
   */
  cards?: number | undefined;
  /** Tokens one request may use (the model's context_length); the profile's args win, as the engine reads them. */
  context?: number | undefined;
  /** llama.cpp's requests at once; the profile's --parallel wins. Default: its engine's (LLAMACPP_DEFAULT_SLOTS). */
  slots?: number | undefined;
  /** `0.21.0`: vLLM's defaults changed there. Unknown: the newest engine's defaults. */
  engineVersion?: string | undefined;
  /** How many cards to try when these do not fit ("or 2 cards"); 0 not to try. Default 8. */
  maxCards?: number | undefined;
}
