import type { EngineName } from '../catalog/model-spec.js';
import type { ModelShape } from '../models/shape.js';
import type { KvLayers, KvOptions } from './kv-cache.js';
import type { CardMemory, ModelDims, WeightLayout } from './types.js';
import { GIB } from './units.js';

/** What every engine's budget is computed from, resolved once per plan. */
export interface Setup {
  engine: EngineName;
  args: readonly string[];
  class: string;
  cpu: boolean;
  /** One card's total memory, or the node's RAM on a CPU profile. */
  memory: number;
  cards: number;
  tp: number;
  pp: number;
  shape: ModelShape;
  /** All the weights' bytes, as the checkpoint holds them. */
  weights: number;
  layout: WeightLayout | undefined;
  dims: Required<ModelDims>;
  /** The caller's slots (llama.cpp), before the args. */
  slots: number | undefined;
  /** vLLM's major.minor, undefined when not given. */
  version: { major: number; minor: number } | undefined;
  /** Where the engine's own notes go. */
  notes: string[];
}

/** What an engine needs at one context. */
export interface Evaluation {
  perCard: CardMemory[];
  pool?: { bytes: number; tokens: number };
  kvTokens: number;
  slots: number;
}

export interface Budget {
  /** Tokens one request may use as the profile's args fix them (`--max-model-len`, `--ctx-size` ÷ slots). */
  argsContext: number | undefined;
  /** How the KV cache is stored: its value sizes, whether sliding layers are kept in full. */
  kv: Omit<KvOptions, 'tp'>;
  /** What the card gives, in words: `vLLM's 0.92 of 22.5`. Empty when it is the card's total. */
  gives: (card: CardMemory) => string;
  /** Each card's budget is at most the Setup's memory: the planner holds every engine to it (withinDevice). */
  at: (context: number, kv: KvLayers) => Evaluation;
}

export type BudgetOrProblem = { budget: Budget } | { problem: string };

/**
 * An evaluation with no card's budget above the device's memory (`memory`, the Setup's): an
 * engine cannot use more than the card has, whatever its fraction works out to (TensorRT-LLM's
 * "0.9 of what is free after the weights" once counted weights larger than a MIG instance).
 * The planner applies it to every engine's evaluation, so that the rule holds for all of them.
 */
export function withinDevice(ev: Evaluation, memory: number): Evaluation {
  if (ev.perCard.every((c) => c.budget <= memory)) return ev;
  return { ...ev, perCard: ev.perCard.map((c) => (c.budget > memory ? { ...c, budget: memory } : c)) };
}

/** A card's figures from its parts. */
export function card(weights: number, kv: number, parts: Record<string, number>, budget: number): CardMemory {
  const overhead = Object.values(parts).reduce((s, b) => s + b, 0);
  return { weights, kv, overhead, total: weights + kv + overhead, budget, parts };
}

/**
 * The activation peak of one forward pass over `tokens` tokens at 16 bits: the residual stream
 * and its norms (4 × hidden) and the MLP's gate and up projections (2 × feed-forward, split by
 * tp), plus the sampler's fp32 logits for `seqs` requests. Calibrated on vLLM's profile run of
 * Llama-3.1-8B: 1.17 GiB of non-KV overhead at 8192 batched tokens and 256 sequences on an
 * A100-40GB (vLLM 0.15.1), a 1.21 GiB peak at 8192 tokens and 1024 sequences on an H100.
 */
export function activationBytes(o: {
  tokens: number;
  seqs: number;
  dims: Required<ModelDims>;
  tp: number;
}): number {
  const { hidden, feedForward, vocab } = o.dims;
  return o.tokens * 2 * (4 * hidden + (2 * feedForward) / o.tp) + (o.seqs * vocab * 4) / o.tp;
}

/** A fixed figure in GiB, for the constants each engine file cites. */
export const gibBytes = (n: number): number => n * GIB;

/** `0.21.0`, `v0.9.2rc1`: major and minor. */
export function parseVersion(v: string | undefined): { major: number; minor: number } | undefined {
  const m = v === undefined ? null : /^v?(\d+)\.(\d+)/.exec(v.trim());
  return m === null ? undefined : { major: Number(m[1]), minor: Number(m[2]) };
}

export function atLeast(
  v: { major: number; minor: number } | undefined,
  major: number,
  minor: number,
): boolean {
  return v === undefined || v.major > major || (v.major === major && v.minor >= minor);
}
