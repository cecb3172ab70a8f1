import { readdirSync, statSync } from 'node:fs';

import type { EngineName } from '../catalog/model-spec.js';
import { engineFor } from '../engines/registry.js';
import type { Weights } from '../engines/types.js';
import type { FetchResult } from '../models/model-fetcher.js';
import type { Origin } from '../models/origin.js';
import { parseSource } from '../models/source.js';

/** What an engine is given of fetched files: its own choice (a GGUF file and projector, or the snapshot directory). */
export function fetchedWeights(engine: EngineName, origin: Origin, fetched: FetchResult): Weights {
  return engineFor(engine).fetchedWeights({
    source: origin.source,
    files: origin.files.map((f) => f.path),
    snapshotDir: fetched.snapshotDir,
    paths: fetched.paths,
  });
}

/**
 * The weights of a model given by a local path, as this node (`node NAME`) has them. A hub
 * repository or URL is fetched by the agent from the origin the control plane sends with the
 * shard; without one it cannot be, and no engine downloads for itself.
 */
export function weightsOf(source: string, node: string): Weights {
  // Throws, in words, for a source that is not one llmgw reads (the catalog refused it already).
  const parsed = parseSource(source);
  if (parsed.kind !== 'path')
    throw new Error(
      `the control plane sent no pinned files for ${source}, so ${node} cannot fetch it: upgrade the control plane to this agent's version, or update the model (llmgw ctl model apply) so its source is resolved again`,
    );
  let stat;
  try {
    stat = statSync(parsed.path);
  } catch {
    throw new Error(
      `the model's weights ${parsed.path} are not on ${node}: put them there (the path must be the same on every node), or use a hf:// source`,
    );
  }
  return stat.isDirectory() ? { path: parsed.path, files: readdirSync(parsed.path) } : { path: parsed.path };
}
