import { contextProblem, MIN_CONTEXT } from '../catalog/context-bounds.js';
import type { EngineName, ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';
import { cpuClass } from '../gpu/classes.js';
import type { ModelShape } from '../models/shape.js';
import { flagValue } from './args.js';
import { classMemoryBytes } from './class-memory.js';
import type { ClassMemory } from './options.js';
import { planProfile } from './plan.js';
import { type PlanEngine, planEngine } from './plan-engine.js';
import type { CardMemory, MemoryPlan, PlanDevice } from './types.js';
import { GIB, gib, toGib } from './units.js';

/**
 * A served model's context changed, in the three places it lives together: the catalog
 * (context_length, max_output), each profile's engine arguments, and the memory its KV cache
 * takes, checked against what its cards (or its node's RAM) hold. Pure: the caller reads the
 * model, its shape and the cluster's memory, and stores the spec this returns.
 */

/** llama.cpp's slots a request may ask for: requests served at once, each with the whole context. */
export const MAX_SLOTS = 64;

/** What one profile needs at a context, per card (or of the node's RAM on a CPU profile). */
export interface ProfileMemory {
  /** `17.2 of 20.7 GiB a card (weights 14.2, KV 1.8 at 32768 tokens)`. */
  words: string;
  need_gib: number;
  /** What the card (or node) gives; null when its memory is not known. */
  budget_gib: number | null;
  weights_gib: number;
  kv_gib: number;
  /** Cards of one replica; 0 on CPUs. */
  cards: number;
  /** Tokens one request may use, and requests at once (llama.cpp's slots; 1 elsewhere). */
  context: number | null;
  slots: number;
}

export interface ContextProfileChange {
  profile: string;
  engine: EngineName;
  /** The device class, `cpu` for a CPU profile. */
  class: string;
  /** Null when it could not be counted (the note says why). */
  before: ProfileMemory | null;
  after: ProfileMemory | null;
  /** The profile's arguments after the change. */
  args: string[];
  /** A CPU profile's RAM as placement reserves it, after the change. */
  min_memory_gb?: number;
}

/** What a context change does, before anything is stored or restarted. */
export interface ContextChange {
  model: string;
  /** The model's context_length before (null: it had none, the engines used the trained one) and after. */
  before: number | null;
  after: number;
  /** After the change; null when unset (a request may use the rest of its context). */
  max_output: number | null;
  /** The context the model was trained for; null when not known. */
  trained: number | null;
  profiles: ContextProfileChange[];
  /** What could not be checked, said once. */
  note?: string;
}

export interface ContextInput {
  /** The engines to plan with (the registry's). */
  engines: readonly PlanEngine[];
  spec: ModelSpec;
  /** Declared in the settings file: read-only through the API. */
  declared: boolean;
  /** Undefined when not known (yet): the change is made without checking memory. */
  shape: ModelShape | undefined;
  /** Why the shape is not known. */
  shapeProblem?: string | undefined;
  /** The source's files, for the weights' bytes where the shape does not hold them. */
  files?: readonly { path: string; size: number }[] | undefined;
  tokens: number;
  /** llama.cpp's requests at once; default the profile's --parallel, else `defaultSlots`. */
  slots?: number | undefined;
  /** The cluster's classes with the memory their nodes report (`cpu`: the largest node's RAM). */
  classes: readonly ClassMemory[];
  /**
   * The slots llama.cpp replicas get where a profile sets no --parallel (settings
   * llamacpp.parallel); undefined, the engine's own default.
   */
  defaultSlots?: number | undefined;
  engineVersion?: string | undefined;
}

export interface ContextPlan {
  spec: ModelSpec;
  change: ContextChange;
}

/** Memory planned with where a class's is not known: large enough that only the need is read from it. */
const UNKNOWN_MEMORY = 2 ** 50;

/** The new spec at `tokens`, with each profile's memory before and after, or an LlmgwError saying why not. */
export function changeContext(input: ContextInput): ContextPlan {
  const { spec, tokens } = input;
  const name = spec.name;
  refuseRequest(input);
  const trained = input.shape?.trainedContext.known === true ? input.shape.trainedContext.value : undefined;
  if (trained !== undefined && tokens > trained) {
    const strict = [...new Set(spec.profiles.map((p) => p.engine))]
      .map((e) => planEngine(input.engines, e))
      .filter((e) => e.pastTrained !== undefined)
      .map((e) => e.label);
    const engines =
      strict.length === 0
        ? ''
        : `, and ${strict.join(' and ')} refuse${strict.length === 1 ? 's' : ''} to start with it`;
    throw new LlmgwError(
      'invalid_argument',
      `${name} was trained for a context of ${trained} tokens: past it the model answers worse${engines}; ask for ${trained} tokens or fewer`,
    );
  }
  for (const p of spec.profiles) refuseEngine(p, planEngine(input.engines, p.engine));

  const notes = new Notes();
  if (input.shape === undefined) {
    notes.add(
      `the model's shape is not known${input.shapeProblem === undefined ? ' yet' : ` (${input.shapeProblem})`}, so no profile's memory was counted`,
    );
  } else if (trained === undefined) {
    notes.add(
      `the context the model was trained for is not known (${input.shape.trainedContext.known ? '' : input.shape.trainedContext.reason}), so ${tokens} tokens were not checked against it`,
    );
  }

  const profiles: ProfileSpec[] = [];
  const changes: ContextProfileChange[] = [];
  for (const p of spec.profiles) {
    const next = { ...p, args: contextArgs(p, tokens, input) };
    const change = resize(input, p, next, notes);
    profiles.push(
      change.min_memory_gb === undefined ? next : { ...next, min_memory_gb: change.min_memory_gb },
    );
    changes.push(change);
  }

  const maxOutput = nextMaxOutput(spec, tokens);
  const { max_output: _drop, ...rest } = spec;
  const next: ModelSpec = {
    ...rest,
    context_length: tokens,
    ...(maxOutput === undefined ? {} : { max_output: maxOutput }),
    profiles,
  };
  const note = notes.text();
  return {
    spec: next,
    change: {
      model: name,
      before: spec.context_length ?? null,
      after: tokens,
      max_output: maxOutput ?? null,
      trained: trained ?? null,
      profiles: changes,
      ...(note === undefined ? {} : { note }),
    },
  };
}

/**
 * max_output follows the context where it was the default: unset stays unset (a request may
 * use the rest of its context, whatever that is), and one equal to the old context_length (the
 * whole context) becomes the new one. A value set by hand is kept, but never past the context.
 */
export function nextMaxOutput(
  spec: Pick<ModelSpec, 'context_length' | 'max_output'>,
  tokens: number,
): number | undefined {
  const m = spec.max_output;
  if (m === undefined) return undefined;
  if (m === spec.context_length) return tokens;
  return Math.min(m, tokens);
}

function refuseRequest(input: ContextInput): void {
  const { spec, tokens, slots } = input;
  if (input.declared) {
    throw new LlmgwError(
      'read_only',
      `model "${spec.name}" is declared in the settings file, so its context is changed there: edit its context_length (and its profiles' args) with llmgw ctl config edit`,
    );
  }
  const problem = contextProblem(tokens);
  if (problem !== undefined) throw new LlmgwError('invalid_argument', problem);
  if (slots === undefined) return;
  if (!Number.isInteger(slots) || slots < 1 || slots > MAX_SLOTS) {
    throw new LlmgwError(
      'invalid_argument',
      `slots are the requests llama.cpp serves at once, 1 to ${MAX_SLOTS}, not ${slots}`,
    );
  }
  if (!spec.profiles.some((p) => planEngine(input.engines, p.engine).slots !== undefined)) {
    throw new LlmgwError(
      'invalid_argument',
      `slots are llama.cpp's (requests at once, each with the whole context), and model "${spec.name}" has no llama.cpp profile: its engines share one KV pool among the requests they batch; leave slots out`,
    );
  }
}

/** An engine whose context its args cannot change (TensorRT-LLM's is built into its engine). */
function refuseEngine(p: ProfileSpec, engine: PlanEngine): void {
  if (!('fixed' in engine.context)) return;
  throw new LlmgwError(
    'precondition_failed',
    `profile "${p.name}" runs ${engine.label}, ${engine.context.fixed}`,
  );
}

/** A llama.cpp profile's slots: asked for, else its --parallel, else the cluster's default. -1 (automatic) stays. */
function slotsOf(
  p: ProfileSpec,
  slots: NonNullable<PlanEngine['slots']>,
  input: Pick<ContextInput, 'slots' | 'defaultSlots'>,
): number {
  if (input.slots !== undefined) return input.slots;
  const set = Number(flagValue(p.args, ...slots.flags));
  return Number.isInteger(set) && (set > 0 || set === -1) ? set : (input.defaultSlots ?? slots.default);
}

/**
 * The profile's args at `tokens`: llama.cpp's pool is tokens × slots (`--ctx-size`, with
 * `--parallel` slots; an automatic slot count, -1, shares one pool of the context), vLLM
 * `--max-model-len`, SGLang `--context-length`. Each flag is replaced where it is, in the
 * spelling it has, and its repeats dropped; appended when absent.
 */
export function contextArgs(
  p: ProfileSpec,
  tokens: number,
  input: Pick<ContextInput, 'engines' | 'slots' | 'defaultSlots'>,
): string[] {
  const engine = planEngine(input.engines, p.engine);
  if (!('flags' in engine.context)) return p.args;
  const flags = engine.context.flags;
  if (engine.slots === undefined) return setFlag(p.args, flags, String(tokens));
  const slotFlags = engine.slots.flags;
  const slots = slotsOf(p, engine.slots, input);
  const pool = slots === -1 ? tokens : tokens * slots;
  return setFlag(setFlag(p.args, flags, String(pool)), slotFlags, String(slots));
}

/** args with one flag (any of `names`) set to `value`: in place of its first occurrence, its others dropped. */
export function setFlag(args: readonly string[], names: readonly string[], value: string): string[] {
  const out: string[] = [];
  let done = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const spaced = names.includes(a);
    const eq = names.find((n) => a.startsWith(`${n}=`));
    if (!spaced && eq === undefined) {
      out.push(a);
      continue;
    }
    if (spaced && i + 1 < args.length) i++;
    if (done) continue;
    done = true;
    if (eq !== undefined) out.push(`${eq}=${value}`);
    else out.push(a, value);
  }
  return done ? out : [...out, names[0] as string, value];
}

/** One profile before and after: its memory counted, checked against its class, its RAM reserved anew on CPUs. */
function resize(
  input: ContextInput,
  before: ProfileSpec,
  after: ProfileSpec,
  notes: Notes,
): ContextProfileChange {
  const cpu = before.cpu === true;
  const cls = cpu ? cpuClass : (before.gpu_class ?? '');
  const out: ContextProfileChange = {
    profile: before.name,
    engine: before.engine,
    class: cls,
    before: null,
    after: null,
    args: after.args,
  };
  const shape = input.shape;
  if (shape === undefined) return out;

  const known = input.classes.find((c) => c.class === cls)?.memoryBytes;
  const memory = known ?? (cpu ? undefined : classMemoryBytes(cls));
  if (memory === undefined) {
    notes.add(
      cpu
        ? `no node's RAM is known, so profile "${before.name}" was counted but not checked against one`
        : `the memory of a ${cls} card is not known (no node has one, and llmgw does not know the class), so profile "${before.name}" was counted but not checked against it`,
    );
  }
  const device: PlanDevice = cpu
    ? { cpu: true, ramBytes: memory ?? UNKNOWN_MEMORY }
    : { class: cls, memoryBytes: memory ?? UNKNOWN_MEMORY };
  const base = {
    engines: input.engines,
    shape,
    files: input.files,
    device,
    slots: input.defaultSlots,
    engineVersion: input.engineVersion,
  };
  const was = planProfile({ ...base, profile: planned(before), context: input.spec.context_length });
  const will = planProfile({ ...base, profile: planned(after), context: input.tokens });
  const budgetKnown = memory !== undefined;
  const slotted = planEngine(input.engines, before.engine).slots !== undefined;
  out.before = memoryOf(was, { budgetKnown, slotted });
  out.after = memoryOf(will, { budgetKnown, slotted });
  for (const u of will.unknown) notes.add(`profile "${before.name}": ${u}`);

  const engine = planEngine(input.engines, before.engine).label;
  const label = cpu ? `${engine} on CPUs` : `${engine} on ${cls}`;
  // Refused before counting: the profile itself cannot run, whatever the context.
  if (will.reason !== undefined && will.perCard.length === 0) {
    throw new LlmgwError(
      'precondition_failed',
      `profile "${before.name}" (${label}) cannot run as it is, so its context is not changed: ${will.reason}`,
    );
  }
  if (will.reason !== undefined && budgetKnown) {
    throw new LlmgwError(
      'precondition_failed',
      `a context of ${input.tokens} tokens does not fit profile "${before.name}" (${label}): ${will.reason}${remedy(input, before, will)}`,
    );
  }
  if (cpu && out.after !== null) {
    const need = gibUp(will.perCard[0]?.total ?? 0);
    const had = before.min_memory_gb;
    const derived = out.before === null ? undefined : gibUp(was.perCard[0]?.total ?? 0);
    // Raised to what the planner says when lower or unset; lowered with it where it was the
    // planner's figure before; a reserve set by hand above the need is kept.
    out.min_memory_gb = had === undefined || had < need || had === derived ? need : had;
  }
  return out;
}

/** The commands that follow from the planner's remedies. */
function remedy(input: ContextInput, p: ProfileSpec, plan: MemoryPlan): string {
  const name = input.spec.name;
  const ways: string[] = [];
  if (plan.maxContext !== undefined && plan.maxContext >= MIN_CONTEXT) {
    const slots = input.slots === undefined ? '' : ` --slots ${input.slots}`;
    ways.push(`llmgw ctl model context ${name} ${plan.maxContext}${slots}`);
  }
  if (plan.cardsThatFit !== undefined)
    ways.push(`llmgw ctl model gpus ${name} ${plan.cardsThatFit} --profile ${p.name}`);
  return ways.length === 0 ? '' : ` (${ways.join(', or ')})`;
}

function planned(p: ProfileSpec) {
  return {
    name: p.name,
    engine: p.engine,
    tp: p.tp,
    pp: p.pp,
    gpus_per_node: p.gpus_per_node,
    args: p.args,
    cpu: p.cpu,
  };
}

/** The fullest card speaks for the replica, as the planner's reason does. */
function memoryOf(
  plan: MemoryPlan,
  { budgetKnown, slotted }: { budgetKnown: boolean; slotted: boolean },
): ProfileMemory | null {
  let worst: CardMemory | undefined;
  for (const c of plan.perCard)
    if (worst === undefined || c.total - c.budget > worst.total - worst.budget) worst = c;
  if (worst === undefined) return null;
  const cpu = plan.class === cpuClass;
  const tokens =
    slotted && plan.slots > 1
      ? `${plan.slots} slots × ${plan.context ?? 0} tokens`
      : `${plan.context ?? 0} tokens`;
  const of = budgetKnown ? ` of ${gib(worst.budget)}` : '';
  const where = cpu ? 'GiB of RAM' : plan.cards > 1 ? `GiB a card of ${plan.cards}` : 'GiB a card';
  return {
    words: `${gib(worst.total)}${of} ${where} (weights ${gib(worst.weights)}, KV ${gib(worst.kv)} at ${tokens})`,
    need_gib: toGib(worst.total),
    budget_gib: budgetKnown ? toGib(worst.budget) : null,
    weights_gib: toGib(worst.weights),
    kv_gib: toGib(worst.kv),
    cards: plan.cards,
    context: plan.context ?? null,
    slots: plan.slots,
  };
}

/** GiB rounded up to a tenth, as min_memory_gb holds them (placement reserves × 1024 MiB). */
function gibUp(bytes: number): number {
  return Math.ceil((bytes / GIB) * 10) / 10;
}

/** What could not be checked, each said once. */
class Notes {
  readonly #said = new Set<string>();
  add(text: string): void {
    this.#said.add(text);
  }
  text(): string | undefined {
    return this.#said.size === 0 ? undefined : `not checked: ${[...this.#said].join('; ')}`;
  }
}
