import { flagValue, hasFlag, numberFlag } from '../../planner/args.js';
import { type BudgetOrProblem, card, gibBytes, type Setup } from '../../planner/budget.js';
import { kvBytes, type KvLayers } from '../../planner/kv-cache.js';
import type { CardMemory } from '../../planner/types.js';
import { padTo } from '../../planner/units.js';

/**
 * llama.cpp budgets what it allocates, device by device: the layers' weights each card holds,
 * the KV cache of its layers for the whole pool (`--ctx-size`, shared by the `--parallel`
 * slots), a compute buffer, and nothing more; the planner adds a margin a card for the CUDA
 * context and fragmentation, the 1024 MiB `llama-fit-params --fit-target` keeps free
 * (llama.cpp PR #16653).
 */

/** The slots llmgw's llama.cpp engine gives a replica when neither the profile nor the settings say. */
export const LLAMACPP_DEFAULT_SLOTS = 4;
const MARGIN = gibBytes(1);
/** llama.cpp's cache types (`--cache-type-k/-v`): bytes a value, ggml's block sizes (ggml.c type_traits). */
export const LLAMACPP_CACHE_TYPES: Readonly<Record<string, number>> = {
  f32: 4,
  f16: 2,
  bf16: 2,
  q8_0: 34 / 32,
  q4_0: 18 / 32,
  q4_1: 20 / 32,
  iq4_nl: 18 / 32,
  q5_0: 22 / 32,
  q5_1: 24 / 32,
};

/** llama.cpp pads the context to 256 cells (llama-context.cpp, `GGML_PAD(n_ctx, 256)`). */
const CELLS = 256;
const TRUE_VALUES = new Set(['on', 'true', '1', 'enabled']);

export function llamacppBudget(s: Setup): BudgetOrProblem {
  const a = s.args;
  const wholeFrom = (min: number) => (n: number) => Number.isInteger(n) && n >= min;
  const ctx = numberFlag(a, ['--ctx-size', '-c'], wholeFrom(0), 'a whole number of tokens');
  const np = numberFlag(a, ['--parallel', '-np'], wholeFrom(-1), 'a whole number of slots (-1: automatic)');
  const batch = numberFlag(a, ['--batch-size', '-b'], wholeFrom(1), 'a whole number of tokens');
  const ubatch = numberFlag(a, ['--ubatch-size', '-ub'], wholeFrom(1), 'a whole number of tokens');
  for (const f of [ctx, np, batch, ubatch]) if (f.set && 'problem' in f) return { problem: f.problem };

  const flash = flashAttention(a);
  const kType = flagValue(a, '--cache-type-k', '-ctk') ?? 'f16';
  const vType = flagValue(a, '--cache-type-v', '-ctv') ?? 'f16';
  const kBytes = LLAMACPP_CACHE_TYPES[kType];
  const vBytes = LLAMACPP_CACHE_TYPES[vType];
  const types = Object.keys(LLAMACPP_CACHE_TYPES).join(', ');
  if (kBytes === undefined)
    return {
      problem: `the profile's --cache-type-k ${kType} is not a cache type llama.cpp takes (${types})`,
    };
  if (vBytes === undefined)
    return {
      problem: `the profile's --cache-type-v ${vType} is not a cache type llama.cpp takes (${types})`,
    };
  if (!flash && vType !== 'f16' && vType !== 'f32' && vType !== 'bf16') {
    return {
      problem: `quantized V cache was requested, but this requires Flash Attention (llama.cpp's words): drop --flash-attn off, or --cache-type-v ${vType}`,
    };
  }

  const np1 = np.set && 'value' in np ? np.value : undefined;
  const slots = np1 !== undefined && np1 > 0 ? np1 : (s.slots ?? LLAMACPP_DEFAULT_SLOTS);
  // -np -1: automatic slots over one unified pool, which llmgw sizes to one context.
  const unified = np1 === -1 || hasFlag(a, '--kv-unified', '-kvu');
  const poolSlots = np1 === -1 ? 1 : slots;
  const nBatch = batch.set && 'value' in batch ? batch.value : 2048;
  const nUbatch = Math.min(nBatch, ubatch.set && 'value' in ubatch ? ubatch.value : 512);
  const noKvOffload = hasFlag(a, '--no-kv-offload', '-nkvo');
  const swaFull = hasFlag(a, '--swa-full');

  const trained = s.shape.trainedContext.known ? s.shape.trainedContext.value : undefined;
  let argsContext: number | undefined;
  if (ctx.set && 'value' in ctx) {
    // -c 0 is the model's trained context, for the whole pool.
    const pool = ctx.value === 0 ? trained : ctx.value;
    argsContext = pool === undefined ? undefined : Math.floor(pool / (unified ? 1 : poolSlots));
  }

  const split = layerSplit(s);
  if ('problem' in split) return split;

  const at = (context: number, kv: KvLayers) => {
    const cells = cellsOf(context * poolSlots, slots, unified);
    const swaCells = swaFull ? cells : Math.min(cells, padTo(kv.window * poolSlots + nUbatch, CELLS));
    const nUb = Math.min(nUbatch, cells);
    const layerKv = (i: number) => kvBytes(kv, { from: i, to: i + 1, tokens: cells, swaTokens: swaCells });
    const compute = (output: boolean, devices: number) =>
      computeBuffer(s, { cells, nUb, flash, output, slots: poolSlots, devices });
    if (s.cpu) {
      const weights = s.weights;
      const kvAll = kvBytes(kv, { from: 0, to: kv.perLayer.length, tokens: cells, swaTokens: swaCells });
      return {
        perCard: [card(weights, kvAll, { compute: compute(true, 1), margin: MARGIN }, s.memory)],
        kvTokens: cells,
        slots: poolSlots,
      };
    }
    const perCard: CardMemory[] = [];
    for (let d = 0; d < s.cards; d++) {
      let weights = 0;
      let kvOn = 0;
      let layersOn = 0;
      split.device.forEach((dev, i) => {
        if (dev !== d) return;
        layersOn++;
        weights += split.layerWeights(i);
        if (!noKvOffload) kvOn += layerKv(i);
      });
      const output = split.outputDevice === d;
      if (output) weights += s.layout?.output ?? 0;
      const parts: Record<string, number> =
        layersOn > 0 || output ? { compute: compute(output, s.cards), margin: MARGIN } : { margin: MARGIN };
      perCard.push(card(weights, kvOn, parts, s.memory));
    }
    return { perCard, kvTokens: cells, slots: poolSlots };
  };

  return {
    budget: {
      argsContext,
      kv: { kBytes, vBytes, slidingAsFull: swaFull },
      gives: () => '',
      at,
    },
  };
}

/** llama.cpp's cells for a pool: padded to 256, then (slots not sharing one pool) each slot's share padded too. */
function cellsOf(pool: number, slots: number, unified: boolean): number {
  const n = padTo(Math.max(pool, 1), CELLS);
  if (unified || slots <= 1) return n;
  return padTo(Math.floor(n / slots), CELLS) * slots;
}

/** `--flash-attn on|off|auto`, or the bare flag of older builds; auto is on where the backend has it (CUDA, Metal, CPU). */
function flashAttention(args: readonly string[]): boolean {
  if (!hasFlag(args, '--flash-attn', '-fa')) return true;
  const v = flagValue(args, '--flash-attn', '-fa');
  if (v === undefined || v.startsWith('-') || v === 'auto') return true;
  return TRUE_VALUES.has(v.toLowerCase());
}

/**
 * The compute buffer llama.cpp reserves on a device for its worst-case graph: a ubatch of
 * tokens through one layer, the allocator reusing memory between layers, so the peak of
 * - the MLP: residual, norm and attention output (4 × hidden) with gate, up and their product
 *   (3 × feed-forward), f32;
 * - without flash attention, the KQ matrix of f32[cells, ubatch, heads];
 * plus the attention mask (f16 with flash attention, f32 without; copied 4 times when a
 * pipeline spans several cards, as ggml's scheduler does) and one f32 row of logits a slot on
 * the output's device. Calibrated: Llama-3-8B at 8192 cells, ubatch 512, flash attention:
 * 124 MiB logged; on a CPU, ubatch 256 without flash attention: 280 MiB.
 */
function computeBuffer(
  s: Setup,
  o: { cells: number; nUb: number; flash: boolean; output: boolean; slots: number; devices: number },
): number {
  const { hidden, feedForward, vocab } = s.dims;
  const heads = s.shape.attentionHeads.known ? s.shape.attentionHeads.value : Math.ceil(hidden / 128);
  const mlp = o.nUb * 4 * (4 * hidden + 3 * feedForward);
  const kq = o.flash ? 0 : o.cells * o.nUb * heads * 4 + o.nUb * 4 * 3 * hidden;
  const mask = o.cells * o.nUb * (o.flash ? 2 : 4) * (o.devices > 1 ? 4 : 1);
  const logits = o.output ? o.slots * vocab * 4 : 0;
  return Math.max(mlp, kq) + mask + logits;
}

interface LayerSplit {
  /** Per layer, the card it is on; -1 the CPU. */
  device: number[];
  outputDevice: number;
  layerWeights: (i: number) => number;
}

/**
 * Which card each layer goes to (llama_model::load_tensors): the last -ngl layers are
 * offloaded, the output head counting as one more; layer i of those on the first card whose
 * cumulative --tensor-split share exceeds i ÷ the offloaded count (even shares by default, the
 * cards of one class being alike).
 */
function layerSplit(s: Setup): LayerSplit | { problem: string } {
  const a = s.args;
  const layers = s.layout?.layers.length ?? (s.shape.layers.known ? s.shape.layers.value : undefined);
  const n = layers ?? Math.max(s.cards, 1);
  if (layers === undefined) {
    s.notes.push(
      `its layer count is not known (${reasonOf(s)}): the weights are spread evenly over the cards`,
    );
  }
  const layerWeights = (i: number) => (s.layout !== undefined ? (s.layout.layers[i] ?? 0) : s.weights / n);
  if (s.cpu) return { device: Array<number>(n).fill(-1), outputDevice: -1, layerWeights };
  if (s.layout === undefined) {
    s.notes.push(
      'without the GGUF tensor layout the weights are spread evenly by layer, the token embeddings (which llama.cpp keeps in RAM) counted on the cards',
    );
  }

  const raw = flagValue(a, '--n-gpu-layers', '-ngl', '--gpu-layers');
  let ngl = n + 1;
  if (raw !== undefined && raw !== 'all' && raw !== 'auto') {
    const v = Number(raw);
    if (!Number.isInteger(v)) {
      return {
        problem: `the profile's --n-gpu-layers is "${raw}", not a whole number, auto or all: llama.cpp would not start with it`,
      };
    }
    ngl = v < 0 ? n + 1 : Math.min(v, n + 1);
  }
  if (raw === 'auto')
    s.notes.push(
      '-ngl auto lets llama.cpp keep layers on the CPU where the cards are short: counted as all on the cards',
    );

  let shares = Array<number>(s.cards).fill(1);
  const ts = flagValue(a, '--tensor-split', '-ts');
  if (ts !== undefined) {
    const parts = ts.split(/[,/]/).map(Number);
    if (parts.some((p) => !Number.isFinite(p) || p < 0)) {
      return {
        problem: `the profile's --tensor-split is "${ts}", not proportions such as 3,1: llama.cpp would not start with it`,
      };
    }
    shares = shares.map((_, i) => parts[i] ?? 0);
    if (shares.every((p) => p === 0)) shares = shares.map(() => 1);
  }
  const mode = flagValue(a, '--split-mode', '-sm');
  if (mode === 'none') shares = shares.map((_, i) => (i === 0 ? 1 : 0));
  if (mode === 'row') s.notes.push('--split-mode row is counted as the layer split');
  const total = shares.reduce((x, y) => x + y, 0);
  const cumulative: number[] = [];
  shares.reduce((acc, p) => (cumulative.push((acc + p) / total), acc + p), 0);
  const cardOf = (x: number) => {
    const i = cumulative.findIndex((c) => c > x);
    return i === -1 ? s.cards - 1 : i;
  };

  const start = Math.max(n - ngl, 0);
  const offloaded = Math.min(ngl, n + 1);
  const device = Array.from({ length: n }, (_, i) => (i < start ? -1 : cardOf((i - start) / offloaded)));
  const outputDevice = n - start < offloaded ? cardOf((n - start) / offloaded) : -1;
  if (start > 0) {
    s.notes.push(
      `${start} of ${n} layers stay on the CPU (-ngl ${raw ?? ''}): their weights and KV cache use the node's RAM, which is not checked here`,
    );
  }
  return { device, outputDevice, layerWeights };
}

function reasonOf(s: Setup): string {
  return s.shape.layers.known ? '' : s.shape.layers.reason;
}
