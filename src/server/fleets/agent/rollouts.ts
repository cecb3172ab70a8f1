import type { ModelSpec } from '../../../catalog/model-spec.js';
import { LlmgwError } from '../../../core/errors.js';
import type { RestartResult } from '../../../protocol/replica-views.js';
import type { RollOptions, RolloutView } from '../../../protocol/rollout-views.js';
import type { Store } from '../../../store/store.js';
import type { Passes } from '../passes.js';

import { planFleet, runsAsSpecified } from './fleet-plan.js';
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
   * Rolls a change of a model's spec over its replicas (ctl model gpus and context): unless
   * in place, refuses (conflict, naming --in-place) when a successor would find no room beside
   * the replica it replaces, before anything is written; then `write` stores the new spec (and
   * audits it), the roll is recorded (placement waits meanwhile, so that an in-place roll never
   * starts as a surge), and placement runs.
   */
  async rollModel(
    model: string,
    next: ModelSpec,
    o: RollOptions,
    write: () => Promise<void>,
  ): Promise<RolloutView> {
    if (!o.inPlace) await this.#roomBeside(model, next);
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
   * Refuses a surge roll of `next` when the first replica it replaces would find no room beside
   * it: a dry run of placement with `next` in place of the model's spec.
   */
  async #roomBeside(model: string, next: ModelSpec): Promise<void> {
    const sources = this.#o.sources;
    const { specs, memory } = await resolvedSpecs(sources);
    if (!specs.some((s) => s.name === model)) return;
    const input = await planInput(
      sources,
      this.#o.store,
      { specs: specs.map((s) => (s.name === model ? next : s)), memory },
      Date.now(),
    );
    const rollouts = new Map(input.rollouts);
    rollouts.set(model, { mode: 'surge', state: 'rolling', spec: next });
    const plan = planFleet({ ...input, rollouts });
    const mine = new Set(input.replicas.filter((r) => r.model === model).map((r) => r.id));
    const replaced = plan.retire.find((c) => mine.has(c.id));
    const pending = plan.pending.find((p) => p.model === model);
    if (replaced === undefined || pending === undefined) return;
    throw new LlmgwError(
      'conflict',
      `no room beside replica ${replaced.id} for a replica of the changed model ${model} (${pending.reason}): roll the change in place with --in-place, which stops each replica first, one at a time`,
    );
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
