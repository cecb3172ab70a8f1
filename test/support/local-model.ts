import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { writeSafetensors } from '../fakes/safetensors/writer.js';

/**
 * A local model source for tests that serve a model through a fake engine: a file under
 * `dir` (the test's temporary folder, or a new one; never the control plane's data dir, which
 * llmgw refuses as a source), returned as the absolute path a model's `source` takes. Tests
 * that need a local source take it from here, so what llmgw accepts as one is written in one
 * place.
 *
 * It is a safetensors file that holds no tensors (16 bytes): the smallest file llmgw's check
 * of a local source accepts whose shape stays unknown (no GGUF header, no config.json), so the
 * planner leaves it out and placement treats it as it did the empty files tests gave before
 * sources were checked (a CPU replica reserves its profile's memory, nothing more). The fake
 * engines only look that the file exists.
 */
export function localModel(
  dir = mkdtempSync(join(tmpdir(), 'llmgw-model-')),
  name = 'm.safetensors',
): string {
  if (!name.endsWith('.safetensors'))
    throw new Error(
      `localModel writes a safetensors file: name it ${name.replace(/\.[^.]*$/, '')}.safetensors`,
    );
  const path = join(dir, name);
  writeFileSync(path, writeSafetensors());
  return path;
}
