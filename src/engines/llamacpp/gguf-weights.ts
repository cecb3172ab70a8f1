import { basename, join } from 'node:path';

import type { FetchedFiles, Weights } from '../types.js';

/** A vision projector (mmproj) file, not a model. */
function isProjector(path: string): boolean {
  return basename(path).toLowerCase().includes('mmproj');
}

/**
 * llama.cpp is given the first GGUF of the fetched files (the first part of a split one,
 * in the origin's order) and its projector.
 */
export function ggufWeights(fetched: FetchedFiles): Weights {
  const ggufs = fetched.files.filter((f) => f.toLowerCase().endsWith('.gguf'));
  const model = ggufs.find((f) => !isProjector(f));
  const projector = ggufs.find((f) => isProjector(f));
  if (model === undefined)
    throw new Error(
      `${fetched.source} has no GGUF model file (${fetched.files.join(', ')}): llamacpp serves GGUF weights; name a .gguf file of it, or use engine: vllm or sglang`,
    );
  const at = (path: string) => fetched.paths[path] ?? join(fetched.snapshotDir, ...path.split('/'));
  return { path: at(model), ...(projector === undefined ? {} : { projector: at(projector) }) };
}
