import { isMigClass, parseGpuClass } from '../catalog/gpu-class.js';
import { cpuClass } from '../gpu/classes.js';
import type { ModelShape } from '../models/shape.js';
import { type Budget, type Evaluation, parseVersion, type Setup, withinDevice } from './budget.js';
import { splitsHeads } from './heads.js';
import { type KvLayers, kvLayers } from './kv-cache.js';
import { migRemedies } from './mig-remedy.js';
import { type PlanEngine, planEngine } from './plan-engine.js';
import type { PlanInput } from './plan-input.js';
import type { CardMemory, MemoryPlan, ModelDims } from './types.js';
import { gib } from './units.js';
import { weightBytes } from './weights.js';

/** The smallest context a plan looks at, the catalog's least context_length; maxContext is a multiple of it. */
const STEP = 256;
/** How far maxContext looks when the trained context is not known. */
const FAR = 2 ** 24;

/**
 * What one replica of a profile needs on each card of a device class (or of a node's RAM), as
 * its engine budgets memory, whether that fits, the largest context that does, and why not.
 */
export function planProfile(input: PlanInput): MemoryPlan {
  const { profile, shape, device } = input;
  const engine = planEngine(input.engines, profile.engine);
  const label = engine.label;
  const cpu = 'cpu' in device;
  const cls = cpu ? cpuClass : device.class;
  const memory = cpu ? device.ramBytes : device.memoryBytes;
  const { cards, tp, pp } = split(input, engine, cpu);
  const plan: MemoryPlan = {
    engine: engine.name,
    class: cls,
    cards,
    tp,
    pp,
    context: undefined,
    contextFrom: undefined,
    slots: 1,
    kvTokens: 0,
    perCard: [],
    fits: false,
    checked: true,
    maxContext: undefined,
    unknown: [],
    notes: [],
  };
  const refuse = (reason: string): MemoryPlan => ({ ...plan, reason });

  if (cpu && !engine.runsOnCpu) {
    const cpuEngines = input.engines.filter((e) => e.runsOnCpu).map((e) => e.name);
    return refuse(
      `${label} does not run on CPUs: a CPU profile needs engine ${cpuEngines.join(' or ')} and a GGUF file`,
    );
  }
  if (!cpu && cards < 1) return refuse(`a ${label} profile on ${cls} needs at least one card`);
  if (!cpu && isMigClass(cls) && cards > 1) {
    const whole = parseGpuClass(cls)?.card ?? cls;
    return refuse(
      `${cls} is a MIG instance: a replica runs on exactly one (a process opens one MIG device, and instances share no NVLink), ` +
        `so ${cards} of them cannot hold one replica: use 1, or whole cards of ${whole}`,
    );
  }
  if (shape.from === 'gguf' && !engine.formats.includes('gguf')) {
    return refuse(
      `${label} does not run GGUF files here: use engine ${ggufEngines(input.engines)} for them, or ${label} on the model's original weights`,
    );
  }
  if (engine.split === 'tensor') {
    const heads = splitsHeads(shape, tp);
    if (!heads.ok) return refuse(heads.reason);
    if (heads.unchecked !== undefined) plan.unknown.push(heads.unchecked);
  }
  if (!Number.isFinite(memory) || memory <= 0) {
    plan.unknown.push(cpu ? "the node's RAM is not known" : `the memory of a ${cls} card is not known`);
    return { ...plan, fits: true, checked: false };
  }
  const weights = weightBytes(input);
  if (!weights.known) {
    plan.unknown.push(`the weights' size is not known (${weights.reason})`);
    return { ...plan, fits: true, checked: false };
  }

  const notes: string[] = [];
  let args = profile.args;
  // A layer split written for another count of cards is dropped, as `llmgw ctl model gpus` drops it.
  const [splitFlag] = engine.cardFlags.cards;
  if (
    engine.split === 'layer' &&
    splitFlag !== undefined &&
    input.cards !== undefined &&
    input.cards !== profile.gpus_per_node
  ) {
    const kept = withoutFlag(args, ...engine.cardFlags.cards);
    if (kept.length !== args.length)
      notes.push(`its ${splitFlag} is for ${profile.gpus_per_node} cards: left out for ${cards}`);
    args = kept;
  }
  const setup: Setup = {
    engine: engine.name,
    args,
    class: cls,
    cpu,
    memory,
    cards,
    tp,
    pp,
    shape,
    weights: weights.value,
    layout: input.layout,
    dims: resolveDims(shape, input.dims, notes),
    slots: input.slots,
    version: parseVersion(input.engineVersion),
    notes,
  };
  const made = engine.budget(setup);
  if ('problem' in made) return { ...refuse(made.problem), notes };
  const budget: Budget = { ...made.budget, at: (c, kv) => withinDevice(made.budget.at(c, kv), memory) };

  const kvk = kvLayers(shape, { tp, ...budget.kv });
  notes.push(...kvk.notes);
  let kv: KvLayers;
  if (kvk.known) kv = kvk.value;
  else {
    plan.unknown.push(
      `its KV cache is not known (${kvk.reason}): only the weights and ${label}'s own memory are counted`,
    );
    kv = {
      perLayer: Array<number>(shape.layers.known ? shape.layers.value : 1).fill(0),
      sliding: [],
      window: 0,
    };
  }

  const trained = shape.trainedContext.known ? shape.trainedContext.value : undefined;
  let context: number | undefined;
  let contextFrom: MemoryPlan['contextFrom'];
  if (budget.argsContext !== undefined) [context, contextFrom] = [budget.argsContext, 'args'];
  else if (input.context !== undefined) [context, contextFrom] = [input.context, 'input'];
  else if (trained !== undefined) [context, contextFrom] = [trained, 'trained'];
  else {
    plan.unknown.push(
      `the context is not known: the model sets no context_length and its trained context is not known (${shape.trainedContext.known ? '' : shape.trainedContext.reason})`,
    );
  }

  const ev = budget.at(context ?? 0, kv);
  const checked = kvk.known && context !== undefined;
  const fits = fitsIn(ev);
  let maxContext: number | undefined;
  if (kvk.known) {
    if (trained === undefined)
      notes.push(`its trained context is not known: the largest context looked at is ${FAR}`);
    maxContext = largestContext((c) => fitsIn(budget.at(c, kv)), trained ?? FAR);
  }
  const out: MemoryPlan = {
    ...plan,
    context,
    contextFrom,
    slots: ev.slots,
    kvTokens: ev.kvTokens,
    perCard: ev.perCard,
    pool: ev.pool,
    fits,
    checked,
    maxContext,
    notes,
  };

  if (context !== undefined && trained !== undefined && context > trained) {
    if (engine.pastTrained !== undefined)
      return { ...out, fits: false, reason: beyondTrained(engine, context, trained) };
    notes.push(
      `a context of ${context} is more than the ${trained} tokens the model was trained for: llama.cpp warns and answers worse past it`,
    );
  }
  if (fits) return out;
  const mig = !cpu && isMigClass(cls);
  out.cardsThatFit = cpu || mig ? undefined : moreCards(input, cards);
  // On a MIG instance, maxCards 0 (placement's quick plan) also leaves the other classes untried.
  const instead = mig && input.maxCards !== 0 ? migRemedies(input, planProfile) : undefined;
  return { ...out, reason: memoryReason(out, ev, { budget, engine, instead }) };
}

/**
 * The fewest cards of the device's class (1 to maxCards) on which the profile fits; the plan at
 * one card, with its reason, when none does. A CPU profile or a MIG instance has one answer.
 */
export function fewestCards(input: PlanInput): MemoryPlan {
  if ('cpu' in input.device || isMigClass(input.device.class))
    return planProfile({ ...input, cards: undefined });
  const max = input.maxCards ?? 8;
  for (let n = 1; n <= max; n++) {
    const p = planProfile({ ...input, cards: n, maxCards: 0 });
    if (p.fits) return p;
  }
  return planProfile({ ...input, cards: 1, maxCards: 0 });
}

/** The engines that run GGUF files, as a message names them: `llamacpp`. */
function ggufEngines(engines: readonly PlanEngine[]): string {
  return engines
    .filter((e) => e.formats.includes('gguf'))
    .map((e) => e.name)
    .join(' or ');
}

/** args without a flag and its value, in either spelling. */
function withoutFlag(args: readonly string[], ...names: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (names.includes(a)) i++;
    else if (!names.some((n) => a.startsWith(`${n}=`))) out.push(a);
  }
  return out;
}

/** Cards, tensor and pipeline parallel of a replica: llama.cpp splits by layer; the others by tp (× the profile's pp where it divides). */
function split(
  input: PlanInput,
  engine: PlanEngine,
  cpu: boolean,
): { cards: number; tp: number; pp: number } {
  const p = input.profile;
  if (cpu) return { cards: 0, tp: 1, pp: 1 };
  if (engine.split === 'layer') return { cards: input.cards ?? Math.max(p.gpus_per_node, 1), tp: 1, pp: 1 };
  if (input.cards === undefined) return { cards: p.tp * p.pp, tp: p.tp, pp: p.pp };
  const pp = input.cards % p.pp === 0 ? p.pp : 1;
  return { cards: input.cards, tp: input.cards / pp, pp };
}

function fitsIn(ev: Evaluation): boolean {
  return ev.perCard.every((c) => c.total <= c.budget);
}

/** The largest multiple of STEP up to `cap` (or `cap` itself) at which `fits` holds; undefined when not even STEP does. */
function largestContext(fits: (context: number) => boolean, cap: number): number | undefined {
  if (cap >= STEP && fits(cap)) return cap;
  let lo = 0;
  let hi = Math.floor(cap / STEP);
  if (hi < 1 || !fits(STEP)) return undefined;
  lo = 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid * STEP)) lo = mid;
    else hi = mid - 1;
  }
  return lo * STEP;
}

function moreCards(input: PlanInput, cards: number): number | undefined {
  const max = input.maxCards ?? 8;
  for (let n = cards + 1; n <= max; n++) {
    if (planProfile({ ...input, cards: n, maxCards: 0 }).fits) return n;
  }
  return undefined;
}

function beyondTrained(engine: PlanEngine, context: number, trained: number): string {
  const says = engine.pastTrained?.(context, trained) ?? '';
  return `a context of ${context} tokens is more than the ${trained} the model was trained for, which ${engine.label} refuses ("${says}"): ${trained} tokens or fewer`;
}

/**
 * `needs 46.1 GiB a card on l4-24g (weights 15.0, KV 31.1 at 131072 tokens, overhead 1.3), the
 * card gives 20.7 (…): a context up to 40960 fits, or 2 cards`. On a MIG instance, which is one
 * device whatever the count, `instead` (migRemedies) takes the place of more cards.
 */
function memoryReason(
  plan: MemoryPlan,
  ev: Evaluation,
  { budget, engine, instead }: { budget: Budget; engine: PlanEngine; instead: string[] | undefined },
): string {
  let worst = 0;
  ev.perCard.forEach((c, i) => {
    const w = ev.perCard[worst] as CardMemory;
    if (c.total - c.budget > w.total - w.budget) worst = i;
  });
  const c = ev.perCard[worst] as CardMemory;
  const cpu = plan.class === cpuClass;
  const slotted = engine.slots !== undefined;
  const where = cpu
    ? 'of RAM'
    : engine.split === 'layer' && plan.cards > 1
      ? `on card ${worst + 1} of ${plan.cards} on ${plan.class}`
      : `a card on ${plan.class}`;
  const tokens =
    slotted && ev.slots > 1
      ? `${ev.kvTokens} tokens (${ev.slots} slots of ${plan.context ?? 0})`
      : `${slotted ? ev.kvTokens : (plan.context ?? 0)} tokens`;
  const gives = budget.gives(c);
  const has = cpu
    ? `the node has ${gib(c.budget)}`
    : `the card gives ${gib(c.budget)}${gives === '' ? '' : ` (${gives})`}`;
  const remedies: string[] = [];
  if (plan.maxContext !== undefined) {
    remedies.push(
      `a context up to ${plan.maxContext} fits${slotted && ev.slots > 1 ? ` with ${ev.slots} slots` : ''}`,
    );
  }
  const mig = !cpu && isMigClass(plan.class);
  if (plan.cardsThatFit !== undefined) remedies.push(`${plan.cardsThatFit} cards`);
  remedies.push(...(instead ?? []));
  if (remedies.length === 0) {
    remedies.push(
      cpu
        ? 'a node with more RAM'
        : mig
          ? 'a class with more memory'
          : 'more cards, or a class with more memory',
    );
  }
  const lead = plan.maxContext === undefined ? 'no context fits beside the weights: ' : '';
  return (
    `needs ${gib(c.total)} GiB ${where} (weights ${gib(c.weights)}, KV ${gib(c.kv)} at ${tokens}, overhead ${gib(c.overhead)}), ` +
    `${has}: ${lead}${remedies.join(', or ')}`
  );
}

/** The sizes the working memory is estimated from, guessed from the heads where not given (and said so). */
function resolveDims(shape: ModelShape, dims: ModelDims | undefined, notes: string[]): Required<ModelDims> {
  const heads = shape.attentionHeads.known ? shape.attentionHeads.value : undefined;
  const head = shape.keyHeadDim.known ? shape.keyHeadDim.value : undefined;
  const guessed: string[] = [];
  let hidden = dims?.hidden;
  if (hidden === undefined) {
    hidden = heads !== undefined && head !== undefined ? heads * head : 4096;
    guessed.push(`hidden ${hidden}`);
  }
  let feedForward = dims?.feedForward;
  if (feedForward === undefined) {
    feedForward = Math.round(3.5 * hidden);
    guessed.push(`feed-forward ${feedForward}`);
  }
  let vocab = dims?.vocab;
  if (vocab === undefined) {
    vocab = 128_256;
    guessed.push(`vocabulary ${vocab}`);
  }
  if (guessed.length > 0)
    notes.push(`the engine's working memory is estimated with ${guessed.join(', ')} (not given)`);
  return { hidden, feedForward, vocab };
}
