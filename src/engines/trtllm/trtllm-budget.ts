import { numberFlag } from '../../planner/args.js';
import { activationBytes, type BudgetOrProblem, card, gibBytes, type Setup } from '../../planner/budget.js';
import { kvBytes, type KvLayers, kvPerToken } from '../../planner/kv-cache.js';

/**
 * TensorRT-LLM loads the weights, sets its runtime buffers aside, and gives the KV cache a
 * fraction (`--kv_cache_free_gpu_memory_fraction`, 0.9) of what is then free
 * (tensorrt_llm/commands/serve.py, KvCacheConfig.free_gpu_memory_fraction). The card's
 * budget is thus weights + buffers + 0.9 × the rest (nothing when the rest is not positive,
 * so never more than the card), and the test the same as vLLM's: one request of the full
 * context in the cache.
 */

/** The CUDA context and runtime before the weights, as for SGLang. */
const RUNTIME = gibBytes(1);

export function trtllmBudget(s: Setup): BudgetOrProblem {
  const a = s.args;
  const frac = numberFlag(
    a,
    ['--kv_cache_free_gpu_memory_fraction', '--free_gpu_memory_fraction'],
    (n) => n > 0 && n <= 1,
    'a fraction above 0 and at most 1',
  );
  const seqLen = numberFlag(
    a,
    ['--max_seq_len'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number of tokens',
  );
  const tokens = numberFlag(
    a,
    ['--max_num_tokens'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number of tokens',
  );
  const batch = numberFlag(
    a,
    ['--max_batch_size'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number of requests',
  );
  for (const f of [frac, seqLen, tokens, batch]) if (f.set && 'problem' in f) return { problem: f.problem };

  const fraction = frac.set && 'value' in frac ? frac.value : 0.9;
  // trtllm-serve's defaults: 8192 tokens a step, 2048 requests (BuildConfig; not confirmed for every release).
  const parts = {
    runtime: RUNTIME,
    activations: activationBytes({
      tokens: tokens.set && 'value' in tokens ? tokens.value : 8192,
      seqs: batch.set && 'value' in batch ? batch.value : 2048,
      dims: s.dims,
      tp: s.tp,
    }),
  };
  const weights = s.weights / (s.tp * s.pp);
  const overhead = parts.runtime + parts.activations;
  // Where the weights and buffers leave nothing free, the cache gets nothing and the card's
  // budget is all it has, never more: the weights then do not fit.
  const free = Math.max(s.memory - weights - overhead, 0);
  const pool = fraction * free;
  const budget = Math.min(weights + overhead + pool, s.memory);
  s.notes.push("TensorRT-LLM's sliding-window layers are counted in full; its runtime buffers are estimated");

  const at = (context: number, kv: KvLayers) => {
    const stage = Math.ceil(kv.perLayer.length / s.pp);
    const kvNeed = kvBytes(kv, { from: 0, to: stage, tokens: context, swaTokens: context });
    const c = card(weights, kvNeed, parts, budget);
    const perToken = kvPerToken(kv, 0, stage);
    return {
      perCard: Array.from({ length: s.tp * s.pp }, () => ({ ...c, parts: { ...c.parts } })),
      pool: {
        bytes: pool,
        tokens: perToken > 0 && pool > 0 ? Math.floor(pool / perToken) : 0,
      },
      kvTokens: context,
      slots: 1,
    };
  };
  return {
    budget: {
      argsContext: seqLen.set && 'value' in seqLen ? seqLen.value : undefined,
      kv: { kBytes: 2, vBytes: 2, slidingAsFull: true },
      gives: () =>
        free > 0
          ? `TensorRT-LLM's KV cache takes ${fraction} of what is free after the weights`
          : "all of it: the weights and TensorRT-LLM's buffers leave nothing free for its KV cache",
      at,
    },
  };
}
