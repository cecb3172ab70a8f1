import { isCpuProfile, type ProfileSpec } from '../catalog/model-spec.js';
import { engines } from '../engines/registry.js';
import { cpuClass } from '../gpu/classes.js';
import { type CardMemory, gib, type MemoryPlan, MIB, planProfile } from '../planner/index.js';

import type { DeviceList } from './node-state.js';
import type { ModelMemory } from './types.js';

/**
 * What the memory planner says of one profile of one model on a device of a class with a
 * given memory (a card or a MIG instance in MiB; a node's RAM on a CPU profile). Asked once
 * per class and memory: a cluster's cards of one class report one or a few sizes, so a big
 * cluster costs a few plans per profile, not one per node.
 */
export class ProfileFit {
  /** Names the model and profile, for the memo of reasons. */
  readonly key: string;
  /** The class the profile runs on: its gpu_class, or `cpu`. */
  readonly cls: string;
  readonly #memory: ModelMemory;
  readonly #profile: ProfileSpec;
  readonly #context: number | undefined;
  /** Without looking for more cards: what placement asks on its hot path. */
  readonly #quick = new Map<string, MemoryPlan>();
  /** With the fewest cards that would fit, for reasons. */
  readonly #full = new Map<string, MemoryPlan>();
  /** fits() on the profile's own class by memory: the hot path, a number key. */
  readonly #own = new Map<number, boolean>();

  constructor(o: { model: string; memory: ModelMemory; profile: ProfileSpec; context: number | undefined }) {
    this.key = `${o.model}\u0000${o.profile.name}`;
    this.#memory = o.memory;
    this.#profile = o.profile;
    this.#context = o.context;
    this.cls = isCpuProfile(o.profile) ? cpuClass : (o.profile.gpu_class ?? '');
  }

  /**
   * Whether one replica fits a device of `memoryMib` of `cls` (the profile's class by default).
   * What the planner could not check (an unknown shape's parts, an unreported memory) counts as
   * fitting: placement then claims nothing, as before it knew memory.
   */
  fits(memoryMib: number, cls?: string): boolean {
    if (cls !== undefined && cls !== this.cls) return this.plan(memoryMib, cls).fits;
    let fits = this.#own.get(memoryMib);
    if (fits === undefined) {
      fits = this.plan(memoryMib).fits;
      this.#own.set(memoryMib, fits);
    }
    return fits;
  }

  /** Fits, and nothing it needed was unknown: what a suggestion of another class asks. */
  surelyFits(memoryMib: number, cls: string): boolean {
    const p = this.plan(memoryMib, cls);
    return p.fits && p.checked;
  }

  /** The plan without the search for more cards (quick). */
  plan(memoryMib: number, cls = this.cls): MemoryPlan {
    return this.#ask(this.#quick, memoryMib, cls, 0);
  }

  /** The plan with the fewest cards that would fit (`or 2 cards`): for reasons only. */
  explained(memoryMib: number): MemoryPlan {
    return this.#ask(this.#full, memoryMib, this.cls, undefined);
  }

  /** RAM a CPU replica needs, in MiB (the node's RAM entry); undefined when not counted. */
  ramMib(memoryMib: number): number | undefined {
    const total = this.plan(memoryMib).perCard[0]?.total;
    return total === undefined ? undefined : Math.ceil(total / MIB);
  }

  #ask(
    memo: Map<string, MemoryPlan>,
    memoryMib: number,
    cls: string,
    maxCards: number | undefined,
  ): MemoryPlan {
    const key = `${cls}\u0000${memoryMib}`;
    let plan = memo.get(key);
    if (plan === undefined) {
      const bytes = memoryMib * MIB;
      plan = planProfile({
        engines,
        shape: this.#memory.shape,
        files: this.#memory.files,
        profile: this.#profile,
        device: cls === cpuClass ? { cpu: true, ramBytes: bytes } : { class: cls, memoryBytes: bytes },
        context: this.#context,
        engineVersion: this.#memory.engineVersion,
        maxCards,
      });
      memo.set(key, plan);
    }
    return plan;
  }
}

/** `needs 46.1 GiB a card, gives 20.7`: the fullest card against its budget, for one node's entry. */
export function shortNeed(plan: MemoryPlan): string {
  let worst: CardMemory | undefined;
  for (const c of plan.perCard)
    if (worst === undefined || c.total - c.budget > worst.total - worst.budget) worst = c;
  if (worst === undefined) return plan.reason ?? 'does not fit';
  const where = plan.class === cpuClass ? 'of RAM' : 'a card';
  return `needs ${gib(worst.total)} GiB ${where}, gives ${gib(worst.budget)}`;
}

const listMemory = new WeakMap<DeviceList, number>();

/**
 * The memory of a node's devices of one class (MiB): the least any reports, since a replica
 * may get any of them; 0 when none says (the planner then checks nothing).
 */
export function memoryMibOf(list: DeviceList): number {
  let mib = listMemory.get(list);
  if (mib === undefined) {
    mib = Infinity;
    for (const d of list.devices) mib = Math.min(mib, d.memory_total_mib);
    if (!Number.isFinite(mib)) mib = 0;
    listMemory.set(list, mib);
  }
  return mib;
}
