import type { EngineName } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';

import { llamacppEngine } from './llamacpp/llamacpp-engine.js';
import { sglangEngine } from './sglang/sglang-engine.js';
import { trtllmEngine } from './trtllm/trtllm-engine.js';
import type { Engine } from './types.js';
import { vllmEngine } from './vllm/vllm-engine.js';

/**
 * The one place that names the concrete engines; everything else asks it. A new engine is its
 * folder and one line here: the catalog takes `engine:` names from this list, the planner plans
 * with it, the fleet and the agent ask it by name. The order is the order plans list engines in.
 */
export const engines: readonly Engine[] = Object.freeze([
  llamacppEngine,
  vllmEngine,
  sglangEngine,
  trtllmEngine,
]);

/** What `engine:` may say, in the registry's order. */
export const engineNames: readonly EngineName[] = Object.freeze(engines.map((e) => e.name));

/** The engine of this name; the catalog admits no other, so an unknown name is llmgw's own fault. */
export function engineFor(name: EngineName): Engine {
  const engine = engines.find((e) => e.name === name);
  if (engine === undefined) {
    throw new LlmgwError('internal', `no engine "${name}": llmgw knows ${engineNames.join(', ')}`);
  }
  return engine;
}

/** The engine of this name, if this build knows it: for ctl, whose server may be newer than itself. */
export function knownEngine(name: EngineName): Engine | undefined {
  return engines.find((e) => e.name === name);
}
