import type { ModelSpec } from '../../../catalog/model-spec.js';
import { LlmgwError } from '../../../core/errors.js';
import type { RestartResult } from '../../../protocol/replica-views.js';
import type { RollOptions, RolloutView } from '../../../protocol/rollout-views.js';
import type { Store } from '../../../store/store.js';
import type { Passes } from '../passes.js';

import { type FleetPlan, type PlanReplica, planFleet, runsAsSpecified } from './fleet-plan.js';
import { planInput, resolvedSpecs, type PlanSources } from './placement-input.js';
import type { PlacementPasses } from './placement.js';
import { unknownReplica } from './replica-views.js';
import { rolloutProgress } from './rollout-progress.js';

export interface RolloutsOptions {
  store: Store;
  sources: PlanSources;
  placement: PlacementPasses;
  passes: Passes;
}

/**
 * Restarts and rolls: each recorded as its model's rollout, which placement carries out (a
 * successor beside each replica, or in place) and ends when the new replicas are ready or one
 * failed.
 */
export class Rollouts {
  readonly #o: RolloutsOptions;

  constructor(o: RolloutsOptions) {
    this.#o = o;
  }

  /**
   * Restarts a replica: a new one beside it first, or (in place) it stops first. Recorded as
   * its model's rollout (`restart of ID`), which says when the new one is ready or failed.
   */
  async restart(id: string, inPlace: boolean, actor: string): Promise<RestartResult> {
    const { store, sources, placement } = this.#o;
    const r = sources.placed.replica(id);
    if (r === undefined) throw unknownReplica(id);
    const rollout = {
      model: r.model,
      change: `restart of ${id}`,
      mode: inPlace ? ('in-place' as const) : ('surge' as const),
      by: actor,
      spec: sources.placed.specOf(r.model) ?? r.spec,
      replica: id,
      replaces: 1,
      profiles: profileCounts(sources.placed.replicas, r.model),
      // Before the replica is marked or removed: its successor is made after this.
      started_at: new Date().toISOString(),
    };
    if (inPlace) {
      await store.fleet.apply({ add: [], remove: [{ id, reason: `restarted in place by ${actor}` }] }, actor);
      await store.rollouts.start(rollout);
      await placement.placeNow();
      return {
        replica: id,
        mode: 'in-place',
        message: `replica ${id} stopped; a new replica of ${r.model} takes its place`,
      };
    }
    await store.fleet.retire(id, `restarted by ${actor}`, actor);
    await placement.placeNow();
    const pending = sources.placed.pending.find((p) => p.model === r.model);
    if (pending !== undefined) {
      // No room beside it: keep it running rather than leave a restart hanging.
      await store.fleet.retire(id, null, actor);
      await placement.placeNow();
      throw new LlmgwError(
        'conflict',
        `no room beside replica ${id} for the new one (${pending.reason}): restart it in place with --in-place, which stops it first`,
      );
    }
    await store.rollouts.start(rollout);
    this.#o.passes.poke();
    return {
      replica: id,
      mode: 'surge',
      message: `a new replica of ${r.model} is starting beside ${id}, which stops once the new one is ready`,
    };
  }

  /**
   * Rolls a change of a model's spec over its replicas (ctl model gpus and context): refuses
   * (checkRoll) when a successor would find no room on its profile, before anything is
   * written; then `write` stores the new spec (and audits it), the roll is recorded with each
   * profile's replicas (placement waits meanwhile, so that an in-place roll never starts as a
   * surge), and placement runs.
   */
  async rollModel(
    model: string,
    next: ModelSpec,
    o: RollOptions,
    write: () => Promise<void>,
  ): Promise<RolloutView> {
    await this.checkRoll(model, next, o);
    const started_at = new Date().toISOString();
    const { store, sources, passes } = this.#o;
    await passes.held(async () => {
      await write();
      // The spec as stored (the write may fill in defaults): the rollout is of that one.
      const stored = (await sources.catalog.specs()).find((s) => s.name === model) ?? next;
      await store.rollouts.start({
        model,
        change: o.change,
        mode: o.inPlace ? 'in-place' : 'surge',
        by: o.actor,
        spec: stored,
        replica: null,
        // What runs something else now: a change to a profile no replica runs restarts none.
        replaces: sources.placed.replicas.filter(
          (r) => r.model === model && !r.retiring && !runsAsSpecified(r, stored),
        ).length,
        profiles: profileCounts(sources.placed.replicas, model),
        started_at,
      });
    });
    await this.#o.placement.placeNow();
    // A placement asked for while the rollout was being recorded runs now.
    passes.resume();
    const view = await this.rollout(model);
    if (view === undefined) throw new Error(`the rollout of ${model} was recorded but cannot be read back`);
    return view;
  }

  /**
   * Refuses (conflict) a roll of `next` whose first successor would find no room on its
   * predecessor's profile: beside it (surge), or once it stopped (in place). A dry run of
   * placement with `next` in place of the model's spec; a surge that would fit in place says
   * --in-place, one that would not says what is missing either way. Else how many replicas
   * it would start again (those that do not run `next`).
   */
  async checkRoll(model: string, next: ModelSpec, o: Pick<RollOptions, 'inPlace'>): Promise<number> {
    const restarts = this.#o.sources.placed.replicas.filter(
      (r) => r.model === model && !r.retiring && !runsAsSpecified(r, next),
    ).length;
    if (o.inPlace) {
      const stopped = await this.#dryRoll(model, next, 'in-place');
      if (stopped === undefined) return restarts;
      throw new LlmgwError(
        'conflict',
        `no room for a replica of the changed model ${model} even once replica ${stopped.id} stops (${stopped.reason}): free that room first (llmgw ctl nodes shows what runs where), or make a change that fits`,
      );
    }
    const beside = await this.#dryRoll(model, next, 'surge');
    if (beside === undefined) return restarts;
    if ((await this.#dryRoll(model, next, 'in-place')) === undefined)
      throw new LlmgwError(
        'conflict',
        `no room beside replica ${beside.id} for a replica of the changed model ${model} (${beside.reason}): roll the change in place with --in-place, which stops each replica first, one at a time`,
      );
    throw new LlmgwError(
      'conflict',
      `no room for a replica of the changed model ${model}, beside replica ${beside.id} or in its place (${beside.reason}): free that room first (llmgw ctl nodes shows what runs where), or make a change that fits`,
    );
  }

  /**
   * Plans the first step of a roll of `next` without writing anything: the replica it would
   * replace and why its successor would wait, or undefined when it would be placed (or
   * nothing rolls). In place, that replica is taken as stopped and its devices as free.
   */
  async #dryRoll(
    model: string,
    next: ModelSpec,
    mode: 'surge' | 'in-place',
  ): Promise<{ id: string; reason: string } | undefined> {
    const sources = this.#o.sources;
    const { specs, memory } = await resolvedSpecs(sources);
    if (!specs.some((s) => s.name === model)) return undefined;
    const input = await planInput(
      sources,
      this.#o.store,
      { specs: specs.map((s) => (s.name === model ? next : s)), memory },
      Date.now(),
    );
    const mine = input.replicas.filter((r) => r.model === model);
    const profiles = profileCounts(mine, model);
    const rollouts = new Map(input.rollouts);
    rollouts.set(model, { mode, state: 'rolling', spec: next, profiles });
    let first: PlanReplica | undefined;
    let plan: FleetPlan;
    if (mode === 'surge') {
      plan = planFleet({ ...input, rollouts });
      const ids = new Set(mine.map((r) => r.id));
      const id = plan.retire.find((c) => ids.has(c.id))?.id;
      first = mine.find((r) => r.id === id);
    } else {
      first = mine
        .filter((r) => !r.retiring && !runsAsSpecified(r, next))
        .sort((a, b) => a.created_at.localeCompare(b.created_at))[0];
      if (first === undefined) return undefined;
      const gone = first.id;
      plan = planFleet({
        ...input,
        rollouts,
        replicas: input.replicas.filter((r) => r.id !== gone),
        shards: input.shards.filter((s) => s.replica !== gone),
      });
    }
    const pending = plan.pending.find((p) => p.model === model && p.profile !== undefined);
    if (first === undefined || pending === undefined) return undefined;
    return { id: first.id, reason: pending.reason };
  }

  /** A model's latest rollout, with how many of its replicas run the change; undefined when it never had one. */
  async rollout(model: string): Promise<RolloutView | undefined> {
    const r = await this.#o.store.rollouts.get(model);
    if (r === undefined) return undefined;
    const { placed, registry, views } = this.#o.sources;
    const spec = placed.specOf(model) ?? r.spec;
    const nodes = registry.views();
    const { replaced, total } = rolloutProgress(r, spec, placed.replicas, {
      isReady: (id) => {
        const x = placed.replica(id);
        return x !== undefined && views.view(x, nodes).state === 'ready';
      },
      failure: () => undefined,
    });
    return {
      model,
      change: r.change,
      mode: r.mode,
      by: r.by,
      started_at: r.started_at,
      state: r.state,
      // A finished roll replaced what it replaced, whatever ran since.
      replaced: r.state === 'done' ? total : replaced,
      total,
      ...(r.finished_at === null ? {} : { finished_at: r.finished_at }),
      ...(r.error === null ? {} : { error: r.error }),
    };
  }
}

/** How many of a model's replicas run each profile, those being replaced aside. */
function profileCounts(
  replicas: readonly Pick<PlanReplica, 'model' | 'profile' | 'retiring'>[],
  model: string,
): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of replicas)
    if (r.model === model && !r.retiring) counts[r.profile] = (counts[r.profile] ?? 0) + 1;
  return counts;
}
