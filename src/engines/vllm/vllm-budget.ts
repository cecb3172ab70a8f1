import { flagValue, hasFlag, numberFlag } from '../../planner/args.js';
import {
  activationBytes,
  atLeast,
  type BudgetOrProblem,
  card,
  gibBytes,
  type Setup,
} from '../../planner/budget.js';
import { kvBytes, kvCacheDtypeBytes, type KvLayers, kvPerToken } from '../../planner/kv-cache.js';
import { gib, GIB } from '../../planner/units.js';

/**
 * vLLM budgets a fraction of each card's total memory (`--gpu-memory-utilization`, 0.92 from
 * v0.21, 0.9 before: vllm/config/cache.py, PR #38284), and gives the KV cache whatever its
 * weights, its profiled activation peak, the memory outside PyTorch and (from v0.21) its CUDA
 * graphs leave (gpu_worker.determine_available_memory). It refuses to start unless that cache
 * holds one request of the full --max-model-len (kv_cache_utils._check_enough_kv_cache_memory).
 */

/** vLLM's page: tokens are allocated in blocks of 16 (CacheConfig.block_size). */
const BLOCK = 16;
/** Memory outside PyTorch's allocator that grows while vLLM profiles: 0.31 and 0.39 GiB in its logs. */
const NON_TORCH = gibBytes(0.4);
/** The CUDA-graph estimate vLLM subtracts from v0.21 (0.84 GiB logged for Llama-3.1-8B, vLLM 0.19 with the estimate on). */
const CUDA_GRAPHS = gibBytes(1);

export function vllmBudget(s: Setup): BudgetOrProblem {
  const a = s.args;
  const v021 = atLeast(s.version, 0, 21);
  const util = numberFlag(
    a,
    ['--gpu-memory-utilization'],
    (n) => n > 0 && n <= 1,
    'a fraction above 0 and at most 1',
  );
  const mbt = numberFlag(
    a,
    ['--max-num-batched-tokens'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number of tokens',
  );
  const seqs = numberFlag(
    a,
    ['--max-num-seqs'],
    (n) => Number.isInteger(n) && n > 0,
    'a whole number of requests',
  );
  for (const f of [util, mbt, seqs]) if (f.set && 'problem' in f) return { problem: f.problem };

  const mml = maxModelLen(flagValue(a, '--max-model-len'));
  if (mml === 'bad') {
    return {
      problem: `the profile's --max-model-len is "${flagValue(a, '--max-model-len') ?? ''}", not a number of tokens (or auto): vLLM would not start with it`,
    };
  }
  if (mml === 'auto')
    s.notes.push("--max-model-len auto: vLLM takes the largest context that fits, the plan's max context");

  const modelBytes = fp32Weights(s) ? 4 : 2;
  const kvType = flagValue(a, '--kv-cache-dtype');
  const kvBytesEach = kvCacheDtypeBytes(kvType, modelBytes);
  if (kvBytesEach === undefined) {
    return {
      problem: `the profile's --kv-cache-dtype ${kvType ?? ''} is not one vLLM takes (auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2)`,
    };
  }
  // vLLM runs a float32 checkpoint at 16 bits unless told --dtype float32.
  const weights = s.weights * (modelBytes === 2 && isF32(s) ? 0.5 : 1);
  if (weights !== s.weights)
    s.notes.push("float32 weights are loaded at 16 bits (vLLM --dtype auto): half their files' size");

  // vllm/engine/arg_utils.py: `vllm serve` batches 8192 tokens and 1024 requests on cards of
  // 70 GiB and more other than the A100, 2048 and 256 elsewhere.
  const big = s.memory >= 70 * GIB && !s.class.startsWith('a100');
  const fraction = util.set && 'value' in util ? util.value : v021 ? 0.92 : 0.9;
  const batched = mbt.set && 'value' in mbt ? mbt.value : big ? 8192 : 2048;
  const requests = seqs.set && 'value' in seqs ? seqs.value : big ? 1024 : 256;
  const graphs = v021 && !hasFlag(a, '--enforce-eager') ? CUDA_GRAPHS : 0;
  if (s.version === undefined)
    s.notes.push(
      'vLLM version not given: counted with v0.21+ defaults (0.92 of the card, CUDA graphs profiled)',
    );

  const budget = fraction * s.memory;
  const perCardWeights = weights / (s.tp * s.pp);
  const parts: Record<string, number> = {
    activations: activationBytes({ tokens: batched, seqs: requests, dims: s.dims, tp: s.tp }),
    nonTorch: NON_TORCH,
  };
  if (graphs > 0) parts['cudaGraphs'] = graphs;

  const at = (context: number, kv: KvLayers) => {
    // The first pipeline stage holds the most layers (vLLM get_pp_indices puts the remainder first).
    const stage = Math.ceil(kv.perLayer.length / s.pp);
    const tokens = Math.ceil(context / BLOCK) * BLOCK;
    // SlidingWindowSpec.max_memory_usage: the window plus a batch, and one block more.
    const swa = (Math.ceil(Math.min(kv.window - 1 + batched, context) / BLOCK) + 1) * BLOCK;
    const kvNeed = kvBytes(kv, { from: 0, to: stage, tokens, swaTokens: swa });
    const c = card(perCardWeights, kvNeed, parts, budget);
    const poolBytes = budget - perCardWeights - c.overhead;
    const perToken = kvPerToken(kv, 0, stage);
    const poolTokens = perToken > 0 && poolBytes > 0 ? Math.floor(poolBytes / perToken / BLOCK) * BLOCK : 0;
    return {
      perCard: Array.from({ length: s.tp * s.pp }, () => ({ ...c, parts: { ...c.parts } })),
      pool: { bytes: poolBytes, tokens: poolTokens },
      kvTokens: context,
      slots: 1,
    };
  };

  return {
    budget: {
      argsContext: typeof mml === 'number' ? mml : undefined,
      kv: { kBytes: kvBytesEach, vBytes: kvBytesEach },
      gives: () => `vLLM's ${fraction} of ${gib(s.memory)}`,
      at,
    },
  };
}

/** `--max-model-len`: tokens, with vLLM's k/m suffixes (lower case ×1000, upper case ×1024), or auto (-1). */
function maxModelLen(raw: string | undefined): number | 'auto' | 'bad' | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'auto' || raw === '-1') return 'auto';
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(raw.trim());
  if (m === null) return 'bad';
  const scale = { '': 1, k: 1000, K: 1024, m: 1e6, M: 1024 * 1024 }[m[2] ?? ''] ?? 1;
  return Math.round(Number(m[1]) * scale);
}

function isF32(s: Setup): boolean {
  return s.shape.dtype.known && s.shape.dtype.value === 'f32';
}

/** Whether the weights run at 32 bits: a float32 checkpoint told --dtype float32. */
function fp32Weights(s: Setup): boolean {
  const d = flagValue(s.args, '--dtype');
  return isF32(s) && (d === 'float32' || d === 'float');
}
