import { Hono } from 'hono';

import type { Principal } from '../../auth/authenticator.js';
import { modelSchema, type ModelSpec } from '../../catalog/model-spec.js';
import { isLlmgwError, LlmgwError } from '../../core/errors.js';
import { clientText } from '../../core/redact.js';

import type { ListOf } from '../../core/api-types.js';
import type { Origin } from '../../models/origin.js';
import type { ModelGpusCheck, ModelGpusView } from '../../protocol/model-gpus-views.js';
import type { ModelChange, ModelManifests, ModelUseView, ModelView } from '../../protocol/model-views.js';
import { contextBody, setModelContext, type ContextDeps } from '../services/model-context.js';
import { fitWarnings } from '../services/model-fit.js';
import { changeModelGpus, gpusBody, type ModelGpusDeps } from '../services/model-gpus.js';
import { mayRead, modelUseView } from '../services/model-use.js';
import type { Fleet } from '../fleets/fleet.js';
import type { NodeRegistry } from '../nodes/node-registry.js';
import type { Catalog } from '../state/catalog.js';
import { withScale, type ScaleViews } from './autoscale.js';
import {
  adminOnly,
  ifMatchVersion,
  jsonBody,
  principalOf,
  rawJson,
  refuseEmptyChange,
  type ApiEnv,
} from './context.js';

/** The catalog's routes, and the changes that roll over replicas (context, GPUs). */
export interface ModelRouteDeps extends ScaleViews, ContextDeps, ModelGpusDeps {
  catalog: Pick<
    Catalog,
    'list' | 'get' | 'add' | 'preview' | 'replace' | 'patch' | 'resolve' | 'remove' | 'change' | 'origin'
  >;
  fleet: Pick<Fleet, 'routeTable' | 'rollout' | 'rollModel' | 'checkRoll' | 'manifests'>;
  registry: Pick<NodeRegistry, 'views'>;
}

/** What a patch of a model may change: its spec but its name (a model is not renamed). */
const changeable = Object.keys(modelSchema.shape).filter((k) => k !== 'name');

export function modelRoutes(deps: ModelRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  // Each with its latest rolling change: the console's catalog shows one in progress. A key
  // that is not admin reads the models it may use, as a client needs them: no source, files or nodes.
  app.get('/', async (c) => {
    const who = principalOf(c);
    const models = await deps.catalog.list();
    if (who.role === 'admin')
      return c.json<ListOf<ModelView>>({ items: await Promise.all(models.map((m) => withRollout(deps, m))) });
    const table = await deps.fleet.routeTable();
    return c.json<ListOf<ModelUseView>>({
      items: models
        .filter((m) => mayRead(who.allowedModels, m.name))
        .map((m) => modelUseView(withScale(deps, m), table)),
    });
  });

  app.get('/:name', async (c) => {
    const who = principalOf(c);
    const name = c.req.param('name');
    const model = await readable(deps, who, name);
    if (who.role !== 'admin')
      return c.json<ModelUseView>(modelUseView(withScale(deps, model), await deps.fleet.routeTable()));
    if (model.metadata.version !== undefined) c.header('ETag', `"${model.metadata.version}"`);
    return c.json<ModelView>(await withRollout(deps, model));
  });

  // Checked as an add, written nowhere: the model and the objects Kubernetes would be given.
  app.post('/', adminOnly, async (c, next) => {
    if (c.req.query('dry_run') !== 'true') return next();
    const { spec, origin } = await deps.catalog.preview(stripMetadata(await rawJson(c)));
    return c.json<ModelManifests>({ model: spec, dry_run: true, ...(await objectsOf(deps, spec, origin)) });
  });

  app.get('/:name/manifests', adminOnly, async (c) => {
    const { metadata: _m, status, ...spec } = await deps.catalog.get(c.req.param('name'));
    return c.json<ModelManifests>({ model: spec, objects: await deps.fleet.manifests(spec, status.origin) });
  });

  app.post('/', adminOnly, async (c) => {
    const model = await deps.catalog.add(stripMetadata(await rawJson(c)), principalOf(c).name);
    c.header('Location', `/api/v1/models/${model.name}`);
    return c.json(withWarnings(deps, model), 201);
  });

  app.put('/:name', adminOnly, async (c) => {
    const body = await rawJson(c);
    const model = await deps.catalog.replace(
      c.req.param('name'),
      stripMetadata(body),
      principalOf(c).name,
      expectedVersion(c, body),
    );
    return c.json(withWarnings(deps, model));
  });

  app.patch('/:name', adminOnly, async (c) => {
    const body = await rawJson(c);
    const patch = stripMetadata(body);
    if (typeof patch === 'object' && patch !== null && !Array.isArray(patch))
      refuseEmptyChange(patch, changeable, '{"replicas": 2}');
    const model = await deps.catalog.patch(
      c.req.param('name'),
      patch,
      principalOf(c).name,
      expectedVersion(c, body),
    );
    return c.json(withWarnings(deps, model));
  });

  // Re-pin: resolve the source again (a branch moved on), keeping the old record on a refusal.
  app.post('/:name/resolve', adminOnly, async (c) =>
    c.json(await deps.catalog.resolve(c.req.param('name'), principalOf(c).name)),
  );

  // The context one request may use, in the catalog, the engines' args and their memory; replicas rolled onto it.
  app.post('/:name/context', adminOnly, async (c) =>
    c.json(
      await setModelContext(deps, c.req.param('name'), await jsonBody(c, contextBody), principalOf(c).name),
    ),
  );

  // Cards a replica uses (llmgw ctl model gpus), rolled over the replicas; with dry_run only checked.
  app.post('/:name/gpus', adminOnly, async (c) =>
    c.json<ModelGpusView | ModelGpusCheck>(
      await changeModelGpus(deps, c.req.param('name'), await jsonBody(c, gpusBody), principalOf(c).name),
    ),
  );

  app.delete('/:name', adminOnly, async (c) =>
    c.json(await deps.catalog.remove(c.req.param('name'), principalOf(c).name)),
  );

  return app;
}

/**
 * The model by name, for a key that may read it. To a key limited to some models, one it may
 * not use reads as one that is not there, and no other model's name is suggested.
 */
async function readable(deps: ModelRouteDeps, who: Principal, name: string): Promise<ModelView> {
  if (who.allowedModels === null) return deps.catalog.get(name);
  const hidden = new LlmgwError(
    'not_found',
    `model "${clientText(name)}" does not exist, or key "${who.name}" may not use it (llmgw ctl models lists those it may)`,
  );
  if (!mayRead(who.allowedModels, name)) throw hidden;
  try {
    return await deps.catalog.get(name);
  } catch (e) {
    throw isLlmgwError(e) && e.code === 'not_found' ? hidden : e;
  }
}

async function withRollout(deps: ModelRouteDeps, model: ModelView): Promise<ModelView> {
  const rollout = await deps.fleet.rollout(model.name);
  const scaled = withScale(deps, model);
  return rollout === undefined ? scaled : { ...scaled, status: { ...scaled.status, rollout } };
}

/** The model, with why it would fit no class of the cluster: accepted, but not silently. */
function withWarnings(deps: ModelRouteDeps, model: ModelView): ModelChange {
  const warnings = fitWarnings(model, deps.registry.views());
  return warnings.length === 0 ? model : { ...model, warnings };
}

/**
 * A model read from the API carries `metadata` and `status`; sending them back unchanged is
 * allowed (the version in metadata then guards against a concurrent change), everything else
 * in them is ignored.
 */
function stripMetadata(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const { metadata: _metadata, status: _status, ...rest } = body as Record<string, unknown>;
  return rest;
}

function expectedVersion(c: Parameters<typeof ifMatchVersion>[0], body: unknown): number | undefined {
  const fromHeader = ifMatchVersion(c);
  if (fromHeader !== undefined) return fromHeader;
  const version = (body as { metadata?: { version?: unknown } } | null)?.metadata?.version;
  return typeof version === 'number' ? version : undefined;
}

/** The objects a dry run of an add shows; where engines run on agents, none, and why. */
async function objectsOf(
  deps: Pick<ModelRouteDeps, 'fleet'>,
  spec: ModelSpec,
  origin: Origin | undefined,
): Promise<Pick<ModelManifests, 'objects' | 'note'>> {
  try {
    return { objects: await deps.fleet.manifests(spec, origin) };
  } catch (e) {
    if (!isLlmgwError(e) || e.code !== 'precondition_failed') throw e;
    return { objects: null, note: e.message };
  }
}
