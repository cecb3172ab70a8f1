import { z } from 'zod';

import { LlmgwError } from '../../core/errors.js';
import { engines } from '../../engines/registry.js';
import { changeGpus, type GpusSide, MAX_GPUS, type MemoryPlan, toGib } from '../../planner/index.js';
import type { GpusSideView, ModelGpusCheck, ModelGpusView } from '../../protocol/model-gpus-views.js';
import type { Fleet } from '../fleets/fleet.js';
import type { NodeRegistry } from '../nodes/node-registry.js';
import type { Catalog } from '../state/catalog.js';
import type { SettingsHolder } from '../state/settings-holder.js';
import { clusterClasses } from './model-fit.js';

/** What a change of GPUs reads and calls: the catalog, the nodes' cards, the settings file's path and the fleet's rollout. */
export interface ModelGpusDeps {
  catalog: Pick<Catalog, 'get' | 'change'>;
  registry: Pick<NodeRegistry, 'views'>;
  settings: Pick<SettingsHolder, 'current'>;
  fleet: Pick<Fleet, 'rollModel' | 'checkRoll'>;
}

/** POST /api/v1/models/{name}/gpus. */
export const gpusBody = z.strictObject({
  gpus: z.int().min(1).max(MAX_GPUS),
  profile: z.string().min(1).optional(),
  in_place: z.boolean().default(false),
  /** Checked and answered as if applied, nothing stored or restarted: the console's GPUs… dialog asks each count. */
  dry_run: z.boolean().default(false),
});
export type GpusBody = z.output<typeof gpusBody>;

/**
 * Changes how many cards of a node each replica of a model's profile uses (`llmgw ctl model
 * gpus`): the model, the nodes and the planner checked first (changeGpus), then the fleet rolls
 * the new spec over the replicas, storing it with its audit entry when the roll may start.
 */
export async function changeModelGpus(
  deps: ModelGpusDeps,
  name: string,
  body: GpusBody,
  actor: string,
): Promise<ModelGpusView | ModelGpusCheck> {
  const view = await deps.catalog.get(name);
  if (view.metadata.origin === 'config') {
    throw new LlmgwError(
      'read_only',
      `model "${name}" is declared in the settings file ${deps.settings.current.source.path}: change its profile's cards there (gpus_per_node, and tp for vLLM, SGLang and TensorRT-LLM) with llmgw ctl config edit`,
    );
  }
  const { metadata, status, ...spec } = view;
  const nodes = deps.registry.views();
  const change = changeGpus({
    engines,
    spec,
    gpus: body.gpus,
    profile: body.profile,
    shape: status.shape,
    shapeUnknown: status.problem ?? 'its source is still being resolved',
    files: status.origin?.files,
    nodes: nodes.map((n) => ({ name: n.name, cards: n.devices_by_class })),
    classes: clusterClasses(nodes),
  });
  const profiles = [
    {
      profile: change.profile,
      engine: change.engine,
      class: change.class,
      before: sideView(change.before),
      after: sideView(change.after),
      dropped_args: change.dropped,
    },
  ];
  const note = change.unchecked.length === 0 ? null : `not checked: ${change.unchecked.join('; ')}`;
  if (body.dry_run) {
    // Answered as the change would be: refused where its replicas would find no room.
    const restarted = await deps.fleet.checkRoll(name, change.spec, { inPlace: body.in_place });
    return { model: name, profiles, note, dry_run: true, restarted };
  }
  const rollout = await deps.fleet.rollModel(
    name,
    change.spec,
    { inPlace: body.in_place, actor, change: `gpus ${change.before.cards} → ${change.after.cards}` },
    async () => {
      await deps.catalog.change(name, () => change.spec, {
        actor,
        action: 'model.gpus',
        expectVersion: metadata.version,
      });
    },
  );
  return { model: name, profiles, rollout, note };
}

function sideView(side: GpusSide): GpusSideView {
  const worst = fullest(side.plan);
  const checked = side.plan !== undefined && side.plan.checked;
  return {
    cards: side.cards,
    tp: side.tp,
    pp: side.pp,
    need_gib: worst === undefined ? null : toGib(worst.total),
    budget_gib: worst === undefined ? null : toGib(worst.budget),
    fits: checked ? (side.plan?.fits ?? null) : null,
    max_context: side.plan?.maxContext ?? null,
    reason: side.plan?.fits === false ? (side.plan.reason ?? null) : null,
  };
}

/** The card with the least room speaks for the replica, as in the planner's reason. */
function fullest(plan: MemoryPlan | undefined): MemoryPlan['perCard'][number] | undefined {
  let worst: MemoryPlan['perCard'][number] | undefined;
  for (const c of plan?.perCard ?? [])
    if (worst === undefined || c.total - c.budget > worst.total - worst.budget) worst = c;
  return worst;
}
