import { flagValue, numberFlag } from '../../planner/args.js';
import { type BudgetOrProblem, card, gibBytes, type Setup } from '../../planner/budget.js';
import { kvBytes, kvCacheDtypeBytes, type KvLayers, kvPerToken } from '../../planner/kv-cache.js';
import { gib, MIB } from '../../planner/units.js';

/**
 * SGLang holds `--mem-fraction-static` of each card for its weights and KV pool together, the
 * rest for activations and CUDA graphs (model_runner profile_max_num_token: the pool is what
 * is left after the weights of the fraction). It does not refuse a pool shorter than the
 * context: it clips requests to the pool (max_req_input_len), so a pool that cannot hold one
 * full-context request is counted here as not fitting, as for vLLM.
 */

/** Memory in use before the weights load (CUDA context, NCCL): 93.58 GiB H100 NVL, "avail mem=92.50 GB". */
const RUNTIME = gibBytes(1);

export function sglangBudget(s: Setup): BudgetOrProblem {
  const a = s.args;
  const mfs = numberFlag(a, ['--mem-fraction-static'], (n) => n > 0 && n < 1, 'a fraction between 0 and 1');
  const ctx = numberFlag(
    a,
    ['--context-length'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number of tokens',
  );
  const chunk = numberFlag(a, ['--chunked-prefill-size'], Number.isInteger, 'a whole number of tokens');
  const graphBs = numberFlag(
    a,
    ['--cuda-graph-max-bs'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number',
  );
  for (const f of [mfs, ctx, chunk, graphBs]) if (f.set && 'problem' in f) return { problem: f.problem };

  const kvType = flagValue(a, '--kv-cache-dtype');
  const each = kvCacheDtypeBytes(kvType, 2);
  if (each === undefined) {
    return {
      problem: `the profile's --kv-cache-dtype ${kvType ?? ''} is not one SGLang takes (auto, fp8_e5m2, fp8_e4m3)`,
    };
  }
  const fraction =
    mfs.set && 'value' in mfs
      ? mfs.value
      : defaultMemFractionStatic({
          memoryMib: s.memory / MIB,
          tp: s.tp,
          pp: s.pp,
          chunkedPrefill: chunk.set && 'value' in chunk ? chunk.value : undefined,
          cudaGraphMaxBs: graphBs.set && 'value' in graphBs ? graphBs.value : undefined,
          speculative: flagValue(a, '--speculative-algorithm'),
        });
  const weights =
    (s.weights * (s.shape.dtype.known && s.shape.dtype.value === 'f32' ? 0.5 : 1)) / (s.tp * s.pp);
  if (s.shape.slidingWindow.known && s.shape.slidingWindow.value !== null) {
    s.notes.push(
      "SGLang's sliding-window layers are counted in full (it turns its hybrid SWA pool off for Gemma 2 and 3)",
    );
  }
  const budget = fraction * s.memory;
  const parts = { runtime: RUNTIME };

  const at = (context: number, kv: KvLayers) => {
    const stage = Math.ceil(kv.perLayer.length / s.pp);
    const kvNeed = kvBytes(kv, { from: 0, to: stage, tokens: context, swaTokens: context });
    const c = card(weights, kvNeed, parts, budget);
    const poolBytes = budget - weights - c.overhead;
    const perToken = kvPerToken(kv, 0, stage);
    return {
      perCard: Array.from({ length: s.tp * s.pp }, () => ({ ...c, parts: { ...c.parts } })),
      pool: {
        bytes: poolBytes,
        tokens: perToken > 0 && poolBytes > 0 ? Math.floor(poolBytes / perToken) : 0,
      },
      kvTokens: context,
      slots: 1,
    };
  };
  return {
    budget: {
      argsContext: ctx.set && 'value' in ctx ? ctx.value : undefined,
      kv: { kBytes: each, vBytes: each, slidingAsFull: true },
      gives: () => `SGLang's --mem-fraction-static ${fraction} of ${gib(s.memory)}`,
      at,
    },
  };
}

/**
 * SGLang's default `mem_fraction_static` (server_args._handle_gpu_memory_settings, PR #10975):
 * by the card's memory in MiB, a prefill chunk and CUDA-graph batch; reserved MiB =
 * 512 + 1.5 × max(chunk, 2048) + 2 × graph batch + tp × pp ÷ 8 × 1024, at least 10240 on cards
 * over 60 GiB, plus 2048 (6144 for STANDALONE) with speculative decoding; the fraction is
 * (memory − reserved) ÷ memory to three decimals.
 */
export function defaultMemFractionStatic(o: {
  memoryMib: number;
  tp: number;
  pp: number;
  chunkedPrefill?: number | undefined;
  cudaGraphMaxBs?: number | undefined;
  speculative?: string | undefined;
}): number {
  const gpu = o.memoryMib;
  const [chunkDefault, bsSmallTp, bsLargeTp] =
    gpu < 20 * 1024
      ? [2048, 8, 8]
      : gpu < 35 * 1024
        ? [2048, 24, 80]
        : gpu < 60 * 1024
          ? [4096, 32, 160]
          : gpu < 160 * 1024
            ? [8192, 256, 512]
            : [16384, 512, 512];
  const chunk = o.chunkedPrefill ?? chunkDefault;
  const bs = o.cudaGraphMaxBs ?? (o.tp < 4 ? bsSmallTp : bsLargeTp);
  let reserved = 512 + 1.5 * Math.max(chunk, 2048) + 2 * bs + ((o.tp * o.pp) / 8) * 1024;
  if (gpu > 60 * 1024) reserved = Math.max(reserved, 10 * 1024);
  if (o.speculative !== undefined && o.speculative !== 'NGRAM')
    reserved += o.speculative === 'STANDALONE' ? 6144 : 2048;
  return Math.round(((gpu - reserved) / gpu) * 1000) / 1000;
}
