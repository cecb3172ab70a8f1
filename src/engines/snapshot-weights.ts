import type { FetchedFiles, Weights } from './types.js';

/** The engines that read a Hugging Face snapshot as it is: they are given its directory. */
export function snapshotWeights(fetched: FetchedFiles): Weights {
  return { path: fetched.snapshotDir };
}
