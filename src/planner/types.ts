import type { EngineName, ProfileSpec } from '../catalog/model-spec.js';

/**
 * What the planner is asked: a model's shape, a profile, the device one replica would run on and
 * the context it must hold. Plain data in, plain data out: the caller reads the shape, the
 * files' sizes and the node's memory; the planner only counts.
 */

/** One card (or one MIG instance) of a class with its memory, or a node's CPUs with its RAM. */
export type PlanDevice = { class: string; memoryBytes: number } | { cpu: true; ramBytes: number };

/**
 * A GGUF's tensor bytes by where llama.cpp puts them, from its tensor infos
 * (`layoutFromTensors`): without it the weights are spread evenly over the layers.
 */
export interface WeightLayout {
  /** Bytes of each repeating block (`blk.N.*`), by N. */
  layers: number[];
  /** The token embeddings, which llama.cpp keeps in host memory whatever -ngl says. */
  input: number;
  /** The output head and final norm: on the last card when every layer is offloaded. */
  output: number;
}

/**
 * Sizes the shape does not hold, for the engines' working memory (llama.cpp's compute buffers,
 * vLLM's activation peak): GGUF `<arch>.embedding_length`, `feed_forward_length`,
 * `vocab_size`; config.json `hidden_size`, `intermediate_size`, `vocab_size`.
 */
export interface ModelDims {
  hidden?: number;
  feedForward?: number;
  vocab?: number;
}

/** The parts of a profile the planner reads. */
export type PlanProfile = Pick<ProfileSpec, 'name' | 'engine' | 'tp' | 'pp' | 'gpus_per_node' | 'args'> & {
  cpu?: boolean | undefined;
};

/** What one card (or, on a CPU profile, the node's RAM) holds, in bytes. */
export interface CardMemory {
  weights: number;
  kv: number;
  /** The engine's own working memory: what it is made of is in `parts`. */
  overhead: number;
  /** weights + kv + overhead. */
  total: number;
  /** What the engine lets itself use of the card: its fraction for vLLM and SGLang. */
  budget: number;
  /** The overhead by name as the engine logs it: compute, margin, activations, cudaGraphs, … */
  parts: Record<string, number>;
}

export interface MemoryPlan {
  engine: EngineName;
  /** The device class, `cpu` for a CPU profile. */
  class: string;
  /** Cards a replica uses (0 on CPUs), and how they are split. */
  cards: number;
  tp: number;
  pp: number;
  /** Tokens one request may use, and where that came from. */
  context: number | undefined;
  contextFrom: 'args' | 'input' | 'trained' | undefined;
  /** Requests the KV cache is sized for at once: llama.cpp's slots, 1 elsewhere. */
  slots: number;
  /** Tokens the KV cache holds at start: llama.cpp's --ctx-size (padded as it pads), one request's context elsewhere. */
  kvTokens: number;
  /** Per card; the node's RAM as the one entry on a CPU profile. Empty when refused before counting. */
  perCard: CardMemory[];
  /** vLLM, SGLang, TensorRT-LLM: the KV cache the engine makes of what is left, per card. */
  pool?: { bytes: number; tokens: number } | undefined;
  /** Nothing known says it does not fit: see `checked`. */
  fits: boolean;
  /** False when something the answer needs was not known (`unknown` says what): `fits` then only means not refused. */
  checked: boolean;
  /** The largest context (a multiple of 256, at most the trained context) that fits; undefined when none does or it cannot be told. */
  maxContext: number | undefined;
  /** When these cards do not fit: the fewest of the same class that do, up to maxCards. */
  cardsThatFit?: number | undefined;
  /** Why it does not fit, in words a user acts on. */
  reason?: string | undefined;
  /** What the shape did not know, so was not counted. */
  unknown: string[];
  /** Assumptions made where the engine or the shape left a figure open. */
  notes: string[];
}
