import { Hono } from 'hono';
import { z } from 'zod';

import { contextProblem, contextSchema } from '../../catalog/context-bounds.js';
import { gpuClassProblem } from '../../catalog/gpu-class.js';
import type { ModelSpec } from '../../catalog/model-spec.js';
import { validateModel } from '../../catalog/validate.js';
import { LlmgwError } from '../../core/errors.js';
import { engines } from '../../engines/registry.js';
import { clientText } from '../../core/redact.js';
import { cpuClass } from '../../gpu/classes.js';
import type { Origin } from '../../models/origin.js';
import type { ModelShape } from '../../models/shape.js';
import { type ClassMemory, knownCardClasses, type PlanAnswer, planOptions } from '../../planner/index.js';
import type { NodeView } from '../../protocol/node-views.js';
import { invalidModel, type Catalog } from '../state/catalog.js';
import { clusterClasses } from '../services/model-fit.js';
import type { NodeRegistry } from '../nodes/node-registry.js';
import type { Resolution } from '../state/model-origins.js';
import { jsonBody, principalOf, type ApiContext, type ApiEnv } from './context.js';

export interface PlanRouteDeps {
  registry: Pick<NodeRegistry, 'views'>;
  catalog: Pick<Catalog, 'get'>;
  /** Resolves a source as adding a model would, storing nothing (absent: only the catalog's models are planned). */
  resolveSource?: ((source: string) => Promise<Resolution>) | undefined;
}

const planBody = z.strictObject({
  model: z.string().min(1).optional(),
  /** A model definition as `llmgw ctl model add -f` takes it: resolved, not stored. */
  spec: z.unknown().optional(),
  source: z.string().min(1).optional(),
  context: contextSchema().optional(),
  classes: z.array(z.string().min(1)).optional(),
});
type PlanBody = z.output<typeof planBody>;

/**
 * GET /plan?model=NAME[&context=N][&class=C,...] and POST /plan with a model, a definition or a
 * source: whether the model fits each class of the cluster (or the classes named), on each
 * engine that runs its weights, before anything is downloaded. Nothing is stored.
 */
export function planRoutes(deps: PlanRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get('/', async (c) => {
    const model = c.req.query('model');
    if (model === undefined || model === '') {
      throw new LlmgwError(
        'invalid_argument',
        'name the model to plan: GET /api/v1/plan?model=NAME, or POST /api/v1/plan with a spec or a source',
      );
    }
    const classes = c.req.queries('class')?.flatMap((v) => v.split(','));
    const context = c.req.query('context');
    return c.json<PlanAnswer>(
      await plan(c, deps, {
        model,
        context: context === undefined ? undefined : contextOf(context),
        classes,
      }),
    );
  });

  app.post('/', async (c) => c.json<PlanAnswer>(await plan(c, deps, await jsonBody(c, planBody))));

  return app;
}

async function plan(c: ApiContext, deps: PlanRouteDeps, body: PlanBody): Promise<PlanAnswer> {
  const given = [body.model, body.spec, body.source].filter((x) => x !== undefined).length;
  if (given !== 1) {
    throw new LlmgwError(
      'invalid_argument',
      `give exactly one of model (a model of the catalog), spec (a model definition) or source (hf://ORG/REPO, a URL or a path); got ${given}`,
    );
  }
  // Resolving makes the control plane fetch URLs and read its own files: as adding a model does, admins only.
  const who = principalOf(c);
  if (body.model === undefined && who.role !== 'admin') {
    throw new LlmgwError(
      'permission_denied',
      `planning a definition or a source resolves it as adding a model does, which needs an admin key; key "${who.name}" has the ${who.role} role (any key plans the catalog's models: ?model=NAME)`,
    );
  }
  // The classes are checked before any source is resolved: a typo costs no hub request.
  const classes = classesToPlan(deps.registry.views(), body.classes);
  const m = await modelToPlan(deps, body);
  return planOptions({
    engines,
    model: m.name,
    shape: m.shape,
    files: m.origin?.files,
    profiles: m.spec?.profiles ?? [],
    classes: classes.list,
    named: classes.named,
    context: body.context,
    contextLength: m.spec?.context_length,
  });
}

interface ToPlan {
  name: string;
  shape: ModelShape;
  origin: Origin | undefined;
  spec: ModelSpec | undefined;
}

async function modelToPlan(deps: PlanRouteDeps, body: PlanBody): Promise<ToPlan> {
  if (body.model !== undefined) {
    const view = await deps.catalog.get(body.model);
    const { shape, origin, problem } = view.status;
    if (shape === undefined) throw unknownShape(`model "${view.name}"`, problem);
    return { name: view.name, shape, origin, spec: view };
  }
  let spec: ModelSpec | undefined;
  if (body.spec !== undefined) {
    const r = validateModel(body.spec, engines);
    if (!r.ok) throw invalidModel(r.issues);
    spec = r.model;
  }
  const source = spec?.source ?? body.source ?? '';
  if (deps.resolveSource === undefined)
    throw new LlmgwError('not_implemented', 'this control plane does not resolve sources for plans');
  const r = await deps.resolveSource(source);
  if (r.shape === null) throw unknownShape(clientText(source), r.problem);
  return { name: spec?.name ?? source, shape: r.shape, origin: r.origin ?? undefined, spec };
}

function unknownShape(what: string, problem: string | null | undefined): LlmgwError {
  if (problem === undefined || problem === null) {
    return new LlmgwError(
      'unavailable',
      `${what} is still being resolved: its shape (layers, heads, weights) is not known yet; ask again in a moment`,
    );
  }
  return new LlmgwError(
    'precondition_failed',
    `${what} cannot be planned: its shape (layers, heads, weights) is not known: ${problem}`,
  );
}

function classesToPlan(
  nodes: readonly NodeView[],
  named: readonly string[] | undefined,
): { list: ClassMemory[]; named: boolean } {
  const cluster = clusterClasses(nodes);
  const names = (named ?? []).map((n) => n.trim()).filter((n) => n !== '');
  if (names.length === 0) {
    if (cluster.length === 0) {
      throw new LlmgwError(
        'precondition_failed',
        'no node has joined, so there is no device class to plan for: name the classes (llmgw ctl plan --class l4-24g,a100-80g, or class= in the API)',
      );
    }
    return { list: cluster, named: false };
  }
  const known = new Map(cluster.map((c) => [c.class, c]));
  const list: ClassMemory[] = [];
  for (const name of new Set(names)) {
    const problem = name === cpuClass ? undefined : gpuClassProblem(name);
    if (problem !== undefined) {
      const cards = new Set([...known.keys(), ...knownCardClasses()]);
      cards.delete(cpuClass);
      const all = [...[...cards].sort(), cpuClass];
      throw new LlmgwError(
        'invalid_argument',
        `unknown device class "${clientText(name)}": ${problem}. Classes known here: ${all.join(', ')}`,
      );
    }
    list.push(known.get(name) ?? { class: name });
  }
  return { list, named: true };
}

function contextOf(text: string): number {
  const n = /^\d+$/.test(text) ? Number(text) : text;
  const problem = contextProblem(n);
  if (problem !== undefined) throw new LlmgwError('invalid_argument', problem);
  return n as number;
}
