import { engineNames, type EngineName } from '../catalog/model-spec.js';

import { llamacppEngine } from './llamacpp/llamacpp-engine.js';
import { sglangEngine } from './sglang/sglang-engine.js';
import { trtllmEngine } from './trtllm/trtllm-engine.js';
import type { Engine } from './types.js';
import { vllmEngine } from './vllm/vllm-engine.js';

/** The one place that names the concrete engines; everything else asks it by name. */
const byName: Readonly<Record<EngineName, Engine>> = Object.freeze({
  llamacpp: llamacppEngine,
  vllm: vllmEngine,
  sglang: sglangEngine,
  trtllm: trtllmEngine,
});

/** Every engine, in the catalog's order of names. */
export const engines: readonly Engine[] = Object.freeze(engineNames.map((n) => byName[n]));

export function engineFor(name: EngineName): Engine {
  return byName[name];
}
