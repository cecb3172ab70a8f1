import type { EngineName, ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import { isMigClass, parseGpuClass } from '../catalog/gpu-class.js';
import { didYouMeanSuffix } from '../core/did-you-mean.js';
import { LlmgwError } from '../core/errors.js';
import type { ModelShape } from '../models/shape.js';
import { hasFlag } from './args.js';
import { classMemoryBytes } from './class-memory.js';
import { splitsHeads } from './heads.js';
import type { ClassMemory } from './options.js';
import { planProfile } from './plan.js';
import { type PlanEngine, planEngine } from './plan-engine.js';
import type { MemoryPlan } from './types.js';

/**
 * `llmgw ctl model gpus MODEL N` (seed 003): how many cards of one node each replica of a
 * profile uses. vLLM, SGLang and TensorRT-LLM split the model by tensor parallel, held to its
 * heads; llama.cpp by layer over N cards, its split written for the old count dropped. Checked
 * against the cluster's nodes (one must have N cards of the class) and against the planner
 * (N cards must hold the weights and the context); what could not be checked is said.
 */

/** The most cards a replica may ask for on one node: more than any machine has (8 or 16 a node). */
export const MAX_GPUS = 64;

export interface GpusChangeInput {
  /** The engines to plan with (the registry's). */
  engines: readonly PlanEngine[];
  spec: ModelSpec;
  gpus: number;
  /** The profile to change; needed when the model has several GPU profiles. */
  profile?: string | undefined;
  /** The model's shape; undefined when it is not known, `shapeUnknown` saying why. */
  shape?: ModelShape | undefined;
  shapeUnknown?: string | undefined;
  /** The source's files, for the weights' bytes where the shape does not hold them. */
  files?: readonly { path: string; size: number }[] | undefined;
  /** Each node of the cluster with its devices by class (NodeView.devices_by_class). */
  nodes: readonly { name: string; cards: Readonly<Record<string, number>> }[];
  /** The cluster's classes with the memory nodes report; else the class's own figure. */
  classes: readonly ClassMemory[];
  engineVersion?: string | undefined;
}

/** One side of the change: the profile's cards and split, and what the planner says of it. */
export interface GpusSide {
  /** Cards of one node a replica uses (gpus_per_node). */
  cards: number;
  tp: number;
  pp: number;
  /** Undefined when the shape is not known. */
  plan: MemoryPlan | undefined;
}

export interface GpusChange {
  /** The model with the profile changed. */
  spec: ModelSpec;
  profile: string;
  engine: EngineName;
  class: string;
  before: GpusSide;
  after: GpusSide;
  /** Arguments left out: a layer split for the old count, a parallel size the profile now says. */
  dropped: string[];
  /** What could not be checked, each said once. */
  unchecked: string[];
}

/** The model with one profile's cards changed, or a refusal (LlmgwError) that says why and what to do. */
export function changeGpus(input: GpusChangeInput): GpusChange {
  const { spec, gpus: n } = input;
  if (!Number.isInteger(n) || n < 1 || n > MAX_GPUS) {
    throw new LlmgwError(
      'invalid_argument',
      `the cards a replica uses are a whole number from 1 to ${MAX_GPUS}, not ${n}`,
    );
  }
  const index = profileIndex(spec, input.profile);
  const old = spec.profiles[index] as ProfileSpec;
  const engine = planEngine(input.engines, old.engine);
  const label = engine.label;
  const which = `profile "${old.name}" of "${spec.name}"`;

  if (old.cpu === true || old.gpu_class === undefined) {
    throw new LlmgwError(
      'precondition_failed',
      `${which} runs on CPUs (cpu: true), on no card: give the model a GPU profile with a gpu_class to run it on cards (llmgw ctl model get ${spec.name}, then llmgw ctl model apply -f FILE)`,
    );
  }
  const cls = old.gpu_class;
  if (isMigClass(cls)) {
    throw new LlmgwError(
      'precondition_failed',
      `${which} runs on ${cls}, a MIG instance, and a replica runs on exactly one (a process opens one MIG device, and instances have no NVLink or P2P between them): ` +
        `for ${n} cards give it a whole-card class such as ${parseGpuClass(cls)?.card ?? cls} (llmgw ctl model get ${spec.name}, then llmgw ctl model apply -f FILE)`,
    );
  }
  // Args that hold the model on fewer cards than it is given (llama.cpp's --split-mode none).
  const argsProblem = engine.cardsProblem?.(old.args, n);
  if (argsProblem !== undefined) {
    throw new LlmgwError(
      'precondition_failed',
      `${which} runs ${argsProblem} (llmgw ctl model get ${spec.name}, then llmgw ctl model apply -f FILE)`,
    );
  }
  if (old.gpus_per_node === n) {
    throw new LlmgwError(
      'invalid_argument',
      `${which} already uses ${cardsText(n)} of a node a replica: nothing to change`,
    );
  }

  const dropped: string[] = [];
  const next = resplit(old, engine, { n, dropped });
  const unchecked: string[] = [];
  const { shape } = input;

  if (shape === undefined) {
    unchecked.push(
      `its shape is not known (${input.shapeUnknown ?? 'its source is not resolved'}): whether ${cardsText(n)} split its heads and hold its weights and context is not checked`,
    );
  } else if (engine.split === 'tensor') {
    const heads = splitsHeads(shape, next.tp);
    if (!heads.ok) {
      throw new LlmgwError(
        'precondition_failed',
        `${label} cannot spread ${spec.name} over ${cardsText(n)} (tensor parallel ${next.tp}): ${heads.reason}`,
      );
    }
    if (heads.unchecked !== undefined) unchecked.push(heads.unchecked);
  }

  checkNodes(input.nodes, { cls, n, nodes: next.nodes }, unchecked);

  let before: MemoryPlan | undefined;
  let after: MemoryPlan | undefined;
  if (shape !== undefined) {
    const memory = input.classes.find((c) => c.class === cls)?.memoryBytes ?? classMemoryBytes(cls) ?? NaN;
    const plan = (profile: ProfileSpec) =>
      planProfile({
        engines: input.engines,
        shape,
        files: input.files,
        profile,
        device: { class: cls, memoryBytes: memory },
        context: spec.context_length,
        engineVersion: input.engineVersion,
      });
    before = plan(old);
    after = plan(next);
    if (!after.fits) {
      throw new LlmgwError(
        'precondition_failed',
        `${cardsText(n)} of ${cls} would not hold a replica of ${spec.name} on ${label} (${which}): ${after.reason ?? 'it does not fit'}`,
      );
    }
    if (!after.checked) unchecked.push(...after.unknown);
  }

  const profiles = spec.profiles.map((p, i) => (i === index ? next : p));
  return {
    spec: { ...spec, profiles },
    profile: old.name,
    engine: old.engine,
    class: cls,
    before: { cards: old.gpus_per_node, tp: old.tp, pp: old.pp, plan: before },
    after: { cards: next.gpus_per_node, tp: next.tp, pp: next.pp, plan: after },
    dropped,
    unchecked: [...new Set(unchecked)],
  };
}

function profileIndex(spec: ModelSpec, asked: string | undefined): number {
  const names = spec.profiles.map((p) => p.name);
  if (asked !== undefined) {
    const i = names.indexOf(asked);
    if (i >= 0) return i;
    throw new LlmgwError(
      'not_found',
      `model "${spec.name}" has no profile "${asked}"${didYouMeanSuffix(asked, names)} (its profiles: ${names.join(', ')})`,
    );
  }
  const gpu = spec.profiles.flatMap((p, i) => (p.cpu === true ? [] : [i]));
  const [first] = gpu;
  if (first === undefined) {
    throw new LlmgwError(
      'precondition_failed',
      `model "${spec.name}" runs on CPUs only (${names.map((n) => `profile "${n}"`).join(', ')}), on no card: give it a GPU profile with a gpu_class to run it on cards (llmgw ctl model get ${spec.name}, then llmgw ctl model apply -f FILE)`,
    );
  }
  if (gpu.length > 1) {
    const list = gpu.map((i) => spec.profiles[i]?.name ?? '').join(', ');
    throw new LlmgwError(
      'invalid_argument',
      `model "${spec.name}" has several GPU profiles (${list}): say which with --profile (profile in the API)`,
    );
  }
  return first;
}

/**
 * The profile on n cards of a node: llama.cpp splits by layer (gpus_per_node, no tp); the others
 * by tensor parallel, keeping the pipeline stages where they still divide the cards (the
 * planner's split), so that tp × pp = gpus_per_node × nodes as the catalog requires.
 */
function resplit(
  p: ProfileSpec,
  engine: PlanEngine,
  { n, dropped }: { n: number; dropped: string[] },
): ProfileSpec {
  // The flags each engine reads its split from, which win over the profile's tp and pp.
  const { cards, pp: ppFlags } = engine.cardFlags;
  if (engine.split === 'layer') {
    const args = without(p.args, cards, dropped);
    return { ...p, gpus_per_node: n, args };
  }
  const total = n * p.nodes;
  const pp = total % p.pp === 0 ? p.pp : 1;
  let args = without(p.args, cards, dropped);
  if (pp !== p.pp) args = without(args, ppFlags, dropped);
  return { ...p, tp: total / pp, pp, gpus_per_node: n, args };
}

/** args without these flags and their values, those left out added to `dropped` as written. */
function without(args: readonly string[], flags: readonly string[], dropped: string[]): string[] {
  if (!hasFlag(args, ...flags)) return [...args];
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (flags.includes(a)) {
      dropped.push(args[i + 1] === undefined ? a : `${a} ${args[i + 1]}`);
      i++;
    } else if (flags.some((f) => a.startsWith(`${f}=`))) dropped.push(a);
    else out.push(a);
  }
  return out;
}

/** One node (each of `nodes` for a replica spanning nodes) must have n cards of the class. */
function checkNodes(
  all: GpusChangeInput['nodes'],
  want: { cls: string; n: number; nodes: number },
  unchecked: string[],
): void {
  const { cls, n } = want;
  const having = all
    .map((node) => ({ name: node.name, cards: node.cards[cls] ?? 0 }))
    .filter((x) => x.cards > 0);
  if (having.length === 0) {
    unchecked.push(`no node with ${cls} cards has joined: whether one has ${n} is not checked`);
    return;
  }
  if (having.filter((x) => x.cards >= n).length >= want.nodes) return;
  const counts = [...new Set(having.map((x) => x.cards))].sort((a, b) => a - b);
  const byNode = having
    .sort((a, b) => a.cards - b.cards || a.name.localeCompare(b.name))
    .map((x) => `${x.name} ${x.cards}`)
    .join(', ');
  const lead =
    want.nodes === 1
      ? `no node has ${n} ${cls} cards`
      : `a replica spans ${want.nodes} nodes, and fewer than ${want.nodes} have ${n} ${cls} cards`;
  throw new LlmgwError(
    'precondition_failed',
    `${lead}: the nodes with that class have ${orList(counts.map(String))} (${byNode}); use one of those counts, or join a node with ${n}`,
  );
}

function cardsText(n: number): string {
  return n === 1 ? '1 card' : `${n} cards`;
}

function orList(items: readonly string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} or ${items[items.length - 1] ?? ''}`;
}
