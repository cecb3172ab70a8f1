import { Hono } from 'hono';
import { z } from 'zod';

import { autoscaleSchema } from '../../catalog/model-spec.js';
import { LlmgwError } from '../../core/errors.js';
import type { ModelView } from '../../protocol/model-views.js';
import type { Autoscaler } from '../autoscale/autoscaler.js';
import type { Fleet } from '../fleets/fleet.js';
import type { Catalog } from '../state/catalog.js';
import { adminOnly, jsonBody, principalOf, type ApiEnv } from './context.js';

/** What withScale reads: the autoscaler's view of a model (absent: autoscaling is off here). */
export interface ScaleViews {
  autoscaler?: Pick<Autoscaler, 'view'> | undefined;
}

export interface AutoscaleRouteDeps {
  catalog: Pick<Catalog, 'get' | 'change'>;
  fleet: Pick<Fleet, 'poke'>;
  autoscaler?: Pick<Autoscaler, 'view' | 'countOf'> | undefined;
}

/**
 * PUT /models/:name/autoscale: the model follows load between min and max (`ctl model
 * autoscale`); DELETE: back to a fixed count, the one it runs now. Audited as `model.autoscale`.
 * Declared models are refused by the catalog (they change in the settings file).
 */
export function autoscaleRoutes(deps: AutoscaleRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.put('/:name/autoscale', adminOnly, async (c) => {
    const autoscale = await jsonBody(c, autoscaleSchema);
    // Not found, or declared in the settings file: the catalog's own refusals.
    await deps.catalog.get(c.req.param('name'));
    const model = await deps.catalog.change(c.req.param('name'), (m) => ({ ...m, autoscale }), {
      actor: principalOf(c).name,
      action: 'model.autoscale',
    });
    deps.fleet.poke();
    return c.json<ModelView>(withScale(deps, model));
  });
  app.delete('/:name/autoscale', adminOnly, async (c) => {
    const name = c.req.param('name');
    await deps.catalog.get(name);
    const model = await deps.catalog.change(
      name,
      (current) => {
        if (current.autoscale === undefined)
          throw new LlmgwError(
            'conflict',
            `model ${name} is not autoscaled: it runs a fixed count (llmgw ctl model scale ${name} N changes it)`,
          );
        const { autoscale: _off, ...m } = current;
        // The count it runs now becomes its fixed count: nothing starts or stops.
        return { ...m, replicas: deps.autoscaler?.countOf(current) ?? m.replicas };
      },
      { actor: principalOf(c).name, action: 'model.autoscale' },
    );
    deps.fleet.poke();
    return c.json<ModelView>(model);
  });
  return app;
}

/** The model with its Scale section, for autoscaled models. */
export function withScale(deps: ScaleViews, model: ModelView): ModelView {
  const { metadata: _m, status: _s, ...spec } = model;
  const scale = deps.autoscaler?.view(spec);
  return scale === undefined ? model : { ...model, status: { ...model.status, scale } };
}

export const wakeBody = z.strictObject({ model: z.string().min(1) });
