import { z } from 'zod';

import { engines } from '../../engines/registry.js';
import { changeContext, type ContextChange } from '../../planner/change-context.js';
import type { RolloutView } from '../../protocol/rollout-views.js';

import type { Fleet } from '../fleets/fleet.js';
import type { NodeRegistry } from '../nodes/node-registry.js';
import type { Catalog } from '../state/catalog.js';
import type { SettingsHolder } from '../state/settings-holder.js';
import { clusterClasses } from './model-fit.js';

/**
 * POST /api/v1/models/{name}/context: a served model's context changed (`llmgw ctl model
 * context`). The pure core (planner/change-context.ts) decides the new spec or refuses; this
 * reads what it needs, and hands the spec to the fleet, which rolls the replicas over to it and
 * calls `write` to store it, audited as `model.context`, in one transaction.
 */

export const contextBody = z.strictObject({
  tokens: z.int(),
  slots: z.int().optional(),
  in_place: z.boolean().optional(),
  /** Checked and answered as if applied (room on each profile included), nothing stored or restarted. */
  dry_run: z.boolean().optional(),
});
export type ContextBody = z.output<typeof contextBody>;

/**
 * The answer: the change, the rollout of the replicas onto it, and `restarted`, how many of
 * the model's replicas start again on it (the rollout's total: only those whose model or
 * profile changed; 0 when none runs what changed).
 */
export type ContextChangeView = ContextChange & { rollout: RolloutView; restarted: number };

/** The answer with `dry_run`: the change as it would be, and how many replicas it would start again. */
export type ContextChangeCheck = ContextChange & { restarted: number; dry_run: true };

/** What the change reads and calls: the catalog, the nodes' memory, the settings and the fleet's rollout. */
export interface ContextDeps {
  catalog: Pick<Catalog, 'get' | 'change'>;
  registry: Pick<NodeRegistry, 'views'>;
  settings: Pick<SettingsHolder, 'current'>;
  fleet: Pick<Fleet, 'rollModel' | 'checkRoll'>;
}

export async function setModelContext(
  deps: ContextDeps,
  name: string,
  body: ContextBody,
  actor: string,
): Promise<ContextChangeView | ContextChangeCheck> {
  const view = await deps.catalog.get(name);
  const { metadata, status, ...spec } = view;
  const parallel = deps.settings.current.settings.agent.engines.llamacpp.parallel;
  const { spec: next, change } = changeContext({
    engines,
    spec,
    declared: metadata.origin === 'config',
    shape: status.shape,
    shapeProblem: status.problem,
    files: status.origin?.files,
    tokens: body.tokens,
    slots: body.slots,
    classes: clusterClasses(deps.registry.views()),
    defaultSlots: parallel > 0 ? parallel : undefined,
  });
  if (body.dry_run === true) {
    const restarted = await deps.fleet.checkRoll(name, next, { inPlace: body.in_place === true });
    return { ...change, restarted, dry_run: true };
  }
  const slots = body.slots === undefined ? '' : ` × ${body.slots} slots`;
  const rollout = await deps.fleet.rollModel(
    name,
    next,
    {
      inPlace: body.in_place === true,
      actor,
      change: `context ${spec.context_length ?? 'default'} → ${body.tokens}${slots}`,
    },
    // Stored only if the model is still the version read: a change made meanwhile is not undone.
    async () => {
      await deps.catalog.change(name, () => next, {
        actor,
        action: 'model.context',
        expectVersion: metadata.version,
      });
    },
  );
  return { ...change, rollout, restarted: rollout.total };
}
