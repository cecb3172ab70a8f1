import type { EngineName } from '../catalog/model-spec.js';
import { cpuClass } from '../gpu/classes.js';
import type { ModelShape } from '../models/shape.js';
import { classMemoryBytes } from './class-memory.js';
import { fewestCards, planProfile } from './plan.js';
import { formatOf, type PlanEngine } from './plan-engine.js';
import type { PlanInput } from './plan-input.js';
import type { CardMemory, MemoryPlan, PlanDevice, PlanProfile } from './types.js';
import { toGib } from './units.js';

/**
 * The options `llmgw ctl plan` and GET /api/v1/plan answer with: each of a model's profiles on
 * its classes, and each engine that runs these weights on each device class at the fewest
 * cards that fit, best first.
 */

/** One option as the API sends it (scripts rely on these names): per card, GiB = 2^30. */
export interface PlanOption {
  /** The model's profile, or null for an engine at its defaults. */
  profile: string | null;
  engine: EngineName;
  class: string;
  /** Cards a replica uses; 0 on CPUs. */
  cards: number;
  tp: number;
  /** Fits, and nothing it needed was unknown. */
  fits: boolean;
  /** Of the fullest card (the node's RAM on CPUs); null when refused before counting. */
  need_gib: number | null;
  budget_gib: number | null;
  weights_gib: number | null;
  kv_gib: number | null;
  max_context: number | null;
  /** Why it does not fit, or what was not known; null when it fits. */
  reason: string | null;
}

export interface PlanAnswer {
  model: string;
  /** The context planned for: asked, else the model's context_length, else its trained one. */
  context: number | null;
  options: PlanOption[];
}

/** A device class to plan on, with its memory where a node reported it (`cpu`: a node's RAM). */
export interface ClassMemory {
  class: string;
  memoryBytes?: number | undefined;
}

export interface OptionsInput {
  /** The engines to plan with (the registry's). */
  engines: readonly PlanEngine[];
  model: string;
  shape: ModelShape;
  /** The source's files, for the weights' bytes where the shape does not hold them. */
  files?: readonly { path: string; size: number }[] | undefined;
  /** The model's profiles; none for a bare source. */
  profiles: readonly (PlanProfile & { gpu_class?: string | undefined })[];
  classes: readonly ClassMemory[];
  /** True when the caller named the classes: a profile pinned to another class is left out. */
  named?: boolean | undefined;
  /** The context asked for. */
  context?: number | undefined;
  /** The model's context_length. */
  contextLength?: number | undefined;
  engineVersion?: string | undefined;
}

export function planOptions(input: OptionsInput): PlanAnswer {
  const context = input.context ?? input.contextLength;
  const base = {
    engines: input.engines,
    shape: input.shape,
    files: input.files,
    context,
    engineVersion: input.engineVersion,
  };
  const byClass = new Map(input.classes.map((c) => [c.class, c]));
  const device = (cls: string): PlanDevice => {
    const bytes = byClass.get(cls)?.memoryBytes;
    if (cls === cpuClass) return { cpu: true, ramBytes: bytes ?? NaN };
    return { class: cls, memoryBytes: bytes ?? classMemoryBytes(cls) ?? NaN };
  };
  const gpuClasses = input.classes.map((c) => c.class).filter((c) => c !== cpuClass);
  const rows: { option: PlanOption; headroom: number }[] = [];
  const add = (profile: string | null, plan: MemoryPlan) => rows.push(toOption(profile, plan));

  for (const p of input.profiles) {
    const pinned = p.cpu === true ? cpuClass : p.gpu_class;
    const on =
      pinned === undefined ? gpuClasses : input.named !== true || byClass.has(pinned) ? [pinned] : [];
    for (const cls of on) add(p.name, planProfile({ ...base, profile: p, device: device(cls) }));
  }
  // The engines that run weights of this kind: a GGUF file llama.cpp; original weights the others.
  const format = formatOf(input.shape);
  for (const engine of input.engines.filter((e) => e.formats.includes(format))) {
    for (const { class: cls } of input.classes) {
      const cpu = cls === cpuClass;
      // Only llama.cpp runs on CPUs; the engines of GGUF files are it alone.
      if (cpu && !engine.runsOnCpu) continue;
      const profile: PlanInput['profile'] = {
        name: engine.name,
        engine: engine.name,
        tp: 1,
        pp: 1,
        gpus_per_node: cpu ? 0 : 1,
        args: [],
        cpu,
      };
      add(null, fewestCards({ ...base, profile, device: device(cls) }));
    }
  }

  // An engine's row that says what a profile's row says (a profile with the engine's defaults) is left out.
  const same = (a: PlanOption, b: PlanOption) =>
    a.engine === b.engine && a.class === b.class && a.cards === b.cards && a.need_gib === b.need_gib;
  const named = rows.filter((r) => r.option.profile !== null).map((r) => r.option);
  const kept = rows.filter((r) => r.option.profile !== null || !named.some((n) => same(n, r.option)));
  kept.sort(
    (a, b) =>
      Number(b.option.fits) - Number(a.option.fits) ||
      cardRank(a.option) - cardRank(b.option) ||
      b.headroom - a.headroom,
  );
  const trained = input.shape.trainedContext.known ? input.shape.trainedContext.value : undefined;
  return { model: input.model, context: context ?? trained ?? null, options: kept.map((r) => r.option) };
}

/** Fewer cards first; CPUs after every GPU option (slower whatever their headroom). */
function cardRank(o: PlanOption): number {
  return o.class === cpuClass ? Number.MAX_SAFE_INTEGER : o.cards;
}

function toOption(profile: string | null, plan: MemoryPlan): { option: PlanOption; headroom: number } {
  // The fullest card speaks for the replica, as the planner's reason does.
  let worst: CardMemory | undefined;
  for (const c of plan.perCard)
    if (worst === undefined || c.total - c.budget > worst.total - worst.budget) worst = c;
  const fits = plan.fits && plan.checked;
  const reason = fits
    ? null
    : (plan.reason ?? (plan.checked ? 'does not fit' : `not checked: ${plan.unknown.join('; ')}`));
  return {
    option: {
      profile,
      engine: plan.engine,
      class: plan.class,
      cards: plan.cards,
      tp: plan.tp,
      fits,
      need_gib: worst === undefined ? null : toGib(worst.total),
      budget_gib: worst === undefined ? null : toGib(worst.budget),
      weights_gib: worst === undefined ? null : toGib(worst.weights),
      kv_gib: worst === undefined ? null : toGib(worst.kv),
      max_context: plan.maxContext ?? null,
      reason,
    },
    headroom: worst === undefined ? -Infinity : worst.budget - worst.total,
  };
}
