import type { EngineName } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';
import type { ModelShape } from '../models/shape.js';
import type { BudgetOrProblem, Setup } from './budget.js';

/**
 * What the planner asks of an engine. The planner names no engine: each engine's folder
 * (src/engines/<name>/) answers this, and whoever calls the planner passes the registry's
 * engines in (`engines: readonly PlanEngine[]`), so that the planner stays below them.
 */
export interface PlanEngine {
  readonly name: EngineName;
  /** How messages name it: `vLLM`, `llama.cpp`. */
  readonly label: string;
  /** Whether it runs a CPU profile (cpu: true), on a node's RAM. */
  readonly runsOnCpu: boolean;
  /** The weights it runs: GGUF files, or a checkpoint's original (safetensors) weights. */
  readonly formats: readonly WeightFormat[];
  /**
   * How a replica spreads over its cards: `layer`, the layers over gpus_per_node cards of one
   * node (no tp or pp, no heads to split); `tensor`, tensor parallel (× pipeline) held to the heads.
   */
  readonly split: 'layer' | 'tensor';
  /**
   * Flags whose value is written for one count of cards, left out when the count changes:
   * `cards`, the layer proportions or the tensor parallel size; `pp`, the pipeline stages.
   */
  readonly cardFlags: { readonly cards: readonly string[]; readonly pp: readonly string[] };
  /**
   * Requests at once as slots that each hold a whole context (llama.cpp's `--parallel`), and
   * the flags that set them; undefined where the requests batched share one KV pool.
   */
  readonly slots?: { readonly flags: readonly [string, ...string[]]; readonly default: number } | undefined;
  /**
   * How a context is written in its args: every spelling of the flag, the first written when
   * none is; or why it cannot be changed by args, in words that follow `profile "p" runs X, `.
   */
  readonly context: { readonly flags: readonly [string, ...string[]] } | { readonly fixed: string };
  /** Its own words refusing a context past the trained one; undefined where it only warns. */
  pastTrained?(context: number, trained: number): string;
  /** Why these args cannot run on `cards` cards, from `runs <label> …`; undefined when they can. */
  cardsProblem?(args: readonly string[], cards: number): string | undefined;
  /** What it allocates on each card, as its own code budgets memory. */
  budget(setup: Setup): BudgetOrProblem;
}

/** `gguf`: a GGUF file; `safetensors`: a checkpoint's original weights with its config.json. */
export type WeightFormat = 'gguf' | 'safetensors';

/** The format of weights whose shape was read from a GGUF header or a config.json. */
export function formatOf(shape: Pick<ModelShape, 'from'>): WeightFormat {
  return shape.from === 'gguf' ? 'gguf' : 'safetensors';
}

/** The engine of this name among those the planner was given. */
export function planEngine(engines: readonly PlanEngine[], name: string): PlanEngine {
  const engine = engines.find((e) => e.name === name);
  if (engine === undefined) {
    throw new LlmgwError(
      'internal',
      `the planner was given no engine "${name}" (it has ${engines.map((e) => e.name).join(', ')})`,
    );
  }
  return engine;
}
