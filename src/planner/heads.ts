import type { ModelShape } from '../models/shape.js';

/** Whether tensor parallel over `tp` cards splits a model's heads, and if not, why (in vLLM's words). */
export type HeadsCheck = { ok: true; unchecked?: string } | { ok: false; reason: string };

/**
 * The rule vLLM and SGLang hold tensor parallel to, one rule for the planner, the catalog and
 * `llmgw ctl model gpus` (seed 003's SplitsHeads):
 * - the attention heads divide by tp (vLLM ModelConfig.verify_with_parallel_config);
 * - the KV heads divide by tp, or tp is a multiple of them, each card then holding a copy
 *   (vLLM QKVParallelLinear: divide(kv_heads, tp) or divide(tp, kv_heads), whose assertion
 *   reads "{a} is not divisible by {b}").
 * MLA keeps one latent a layer on every card, so only the attention heads count.
 */
export function splitsHeads(shape: ModelShape, tp: number): HeadsCheck {
  const check = headsSplit(shape, tp);
  return check.ok ? check : { ok: false, reason: `${check.reason} ${sizesHint(shape)}` };
}

function headsSplit(shape: ModelShape, tp: number): HeadsCheck {
  if (tp <= 1) return { ok: true };
  const heads = shape.attentionHeads;
  if (!heads.known) {
    return {
      ok: true,
      unchecked: `whether ${tp} cards split its attention heads is not known: ${heads.reason}`,
    };
  }
  if (heads.value % tp !== 0) {
    return {
      ok: false,
      reason: `Total number of attention heads (${heads.value}) must be divisible by tensor parallel size (${tp}).`,
    };
  }
  if (shape.mla.known && shape.mla.value !== null) return { ok: true };
  const kvCounts = kvHeadCounts(shape);
  if (kvCounts === undefined) {
    const why = shape.kvHeads.known ? '' : `: ${shape.kvHeads.reason}`;
    return { ok: true, unchecked: `whether ${tp} cards split its KV heads is not known${why}` };
  }
  for (const kv of kvCounts) {
    if (kv % tp === 0 || tp % kv === 0) continue;
    const [a, b] = tp < kv ? [kv, tp] : [tp, kv];
    return {
      ok: false,
      reason:
        `${a} is not divisible by ${b}: the model's ${kv} KV heads cannot be spread over tensor parallel size ${tp}, ` +
        `which must divide them or be a multiple of them.`,
    };
  }
  return { ok: true };
}

/** The tensor parallel sizes up to `max` that split the model's heads (unknown heads: every size). */
export function tensorParallelSizes(shape: ModelShape, max = 16): number[] {
  const out: number[] = [];
  for (let tp = 1; tp <= max; tp++) if (headsSplit(shape, tp).ok) out.push(tp);
  return out;
}

/** The distinct KV head counts of its layers (0, a layer without attention, left out). */
function kvHeadCounts(shape: ModelShape): number[] | undefined {
  if (shape.kvHeadsPerLayer !== undefined) return [...new Set(shape.kvHeadsPerLayer.filter((n) => n > 0))];
  return shape.kvHeads.known && shape.kvHeads.value > 0 ? [shape.kvHeads.value] : undefined;
}

function sizesHint(shape: ModelShape): string {
  return `Tensor parallel sizes that split this model: ${tensorParallelSizes(shape).join(', ')}.`;
}
