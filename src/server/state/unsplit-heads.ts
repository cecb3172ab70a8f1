import type { ModelSpec } from '../../catalog/model-spec.js';
import { LlmgwError } from '../../core/errors.js';
import { engineFor } from '../../engines/registry.js';
import type { ModelShape } from '../../models/shape.js';
import { splitsHeads } from '../../planner/index.js';

/**
 * Refuses a profile whose tensor parallel the model's heads cannot split, in vLLM's words
 * (the planner's splitsHeads, the rule `llmgw ctl model gpus` holds to too): vLLM and SGLang
 * would not start it. Only once the shape is known; llama.cpp splits by layer, not heads.
 */
export function refuseUnsplitHeads(spec: ModelSpec, shape: ModelShape | null | undefined): void {
  if (shape === null || shape === undefined) return;
  for (const p of spec.profiles) {
    if (engineFor(p.engine).split === 'layer' || p.cpu === true) continue;
    const check = splitsHeads(shape, p.tp);
    if (check.ok) continue;
    throw new LlmgwError(
      'invalid_argument',
      `profile "${p.name}" of model "${spec.name}" cannot run with tp ${p.tp}, nothing was changed: ${check.reason}`,
    );
  }
}
