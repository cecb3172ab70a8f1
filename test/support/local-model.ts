import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A local model source for tests that serve a model through a fake engine: a file under
 * `dir` (the test's temporary folder), returned as the absolute path a model's `source`
 * takes. Tests that need a local source take it from here, so what llmgw accepts as a
 * local model is written in one place.
 */
export function localModel(dir: string, name = 'm.gguf'): string {
  const path = join(dir, name);
  writeFileSync(path, '');
  return path;
}
