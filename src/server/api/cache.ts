import { Hono } from 'hono';
import { z } from 'zod';

import { LlmgwError, messageOf } from '../../core/errors.js';
import type { Origin } from '../../models/origin.js';
import type { CacheEntry } from '../../protocol/agent-protocol.js';
import type { CacheView, ModelDownloads, PullStarted, PurgeResult } from '../../protocol/cache-views.js';
import type { ModelView } from '../../protocol/model-views.js';
import type { Fleet } from '../fleets/fleet.js';
import type { Catalog } from '../state/catalog.js';
import { adminOnly, jsonBody, principalOf, type ApiEnv } from './context.js';

/** The control plane's mirror of model files (where mirror.enabled): what it holds, and removing an origin's files. */
export interface MirrorFiles {
  list(known?: readonly { model: string; origin: Origin }[]): Promise<CacheEntry[]>;
  purge(origin: Origin): Promise<{ files: number; bytes: number }>;
}

/** Each model's pinned origin. */
interface PinnedOrigins {
  /** A model's pinned origin, as resolved when it was added; undefined when it never was. */
  originOf?: ((model: string) => Promise<Origin | undefined>) | undefined;
}

export interface ModelFileRouteDeps extends PinnedOrigins {
  catalog: Pick<Catalog, 'get' | 'list' | 'remove'>;
  fleet: Pick<Fleet, 'pull' | 'downloads' | 'purge'>;
  mirror?: Pick<MirrorFiles, 'purge'> | undefined;
}

export interface CacheRouteDeps extends PinnedOrigins {
  catalog: Pick<Catalog, 'list'>;
  fleet: Pick<Fleet, 'caches'>;
  mirror?: MirrorFiles | undefined;
}

const pullSchema = z.strictObject({
  /** Node names; none: every ready node. */
  nodes: z.array(z.string().min(1).max(253)).max(10_000).optional(),
});

/** The model's pinned origin; undefined for one whose source was never resolved. */
async function originOf(deps: PinnedOrigins, name: string): Promise<Origin | undefined> {
  return deps.originOf === undefined ? undefined : await deps.originOf(name);
}

async function pinnedOrigin(
  deps: PinnedOrigins & { catalog: Pick<Catalog, 'get'> },
  name: string,
): Promise<{ view: ModelView; origin: Origin }> {
  const view = await deps.catalog.get(name);
  const origin = await originOf(deps, view.name);
  if (origin === undefined)
    throw new LlmgwError(
      'conflict',
      `model ${view.name} has no pinned files (its source ${view.source} was not resolved when it was added): apply it again (llmgw ctl model apply -f FILE) to resolve it`,
    );
  return { view, origin };
}

/**
 * A model's files on the nodes: fetching them ahead of placement (pull), how far each node is
 * (downloads), and removing the model with its files everywhere (DELETE ?purge=true).
 * Mounted on /models before the catalog's own routes.
 */
export function modelFileRoutes(deps: ModelFileRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.post('/:name/pull', adminOnly, async (c) => {
    const body =
      c.req.header('content-length') === '0' || c.req.header('content-type') === undefined
        ? {}
        : await jsonBody(c, pullSchema);
    const { view, origin } = await pinnedOrigin(deps, c.req.param('name'));
    return c.json<PullStarted>(deps.fleet.pull(view.name, origin, body.nodes), 202);
  });

  // Which files each node holds or fetches: an admin's, as the model's files are (GET /models shows users no files).
  app.get('/:name/downloads', adminOnly, async (c) => {
    const { view, origin } = await pinnedOrigin(deps, c.req.param('name'));
    return c.json<ModelDownloads>(deps.fleet.downloads(view.name, origin));
  });

  // Without ?purge the catalog's own DELETE answers.
  app.delete('/:name', adminOnly, async (c, next) => {
    const purge = c.req.query('purge');
    if (purge === undefined || purge === 'false' || purge === '0') {
      await next();
      return;
    }
    const name = c.req.param('name');
    // Read before the model goes: its record may go with it.
    const origin = (await deps.catalog.list()).some((m) => m.name === name)
      ? await originOf(deps, name)
      : undefined;
    const removed = await deps.catalog.remove(name, principalOf(c).name);
    return c.json({ ...removed, purge: await purgeFiles(deps, removed, origin) });
  });

  return app;
}

async function purgeFiles(
  deps: ModelFileRouteDeps,
  removed: ModelView,
  origin: Origin | undefined,
): Promise<PurgeResult> {
  if (origin === undefined)
    return {
      model: removed.name,
      nodes: [],
      kept: `no files were removed: the model had no pinned files to name them (its source ${removed.source} was never resolved)`,
    };
  if (origin.kind === 'path')
    return {
      model: removed.name,
      source: origin.source,
      nodes: [],
      kept: `no files were removed: ${origin.source} is the nodes' own path, which llmgw does not manage`,
    };
  // Another model of the catalog with the same files still needs them.
  let first: ModelView | undefined;
  for (const m of await deps.catalog.list()) {
    const o = await originOf(deps, m.name);
    if (o !== undefined && o.source === origin.source && o.commit === origin.commit) {
      first = m;
      break;
    }
  }
  if (first !== undefined)
    return {
      model: removed.name,
      source: origin.source,
      nodes: [],
      kept: `no files were removed: model ${first.name} uses the same files (${origin.source})`,
    };
  const nodes = await deps.fleet.purge(removed.name, origin);
  let mirror: string | undefined;
  if (deps.mirror !== undefined) {
    try {
      const r = await deps.mirror.purge(origin);
      // Nothing said when the mirror held none of them (it is off, or never fetched them).
      if (r.files > 0) mirror = `removed ${r.files} file${r.files === 1 ? '' : 's'} from the mirror`;
    } catch (e) {
      mirror = `could not remove the files from the mirror: ${messageOf(e)}`;
    }
  }
  return {
    model: removed.name,
    source: origin.source,
    nodes,
    ...(mirror === undefined ? {} : { mirror }),
  };
}

/** GET /cache?node=NAME: what each node's cache (and the mirror) holds, asked of the agents now. */
export function cacheRoutes(deps: CacheRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.get('/', adminOnly, async (c) => {
    const node = c.req.query('node');
    const nodes = await deps.fleet.caches(node === '' ? undefined : node);
    const view: CacheView = { nodes };
    if (deps.mirror !== undefined && node === undefined) {
      try {
        const known: { model: string; origin: Origin }[] = [];
        for (const m of await deps.catalog.list()) {
          const origin = await originOf(deps, m.name);
          if (origin !== undefined) known.push({ model: m.name, origin });
        }
        view.mirror = { entries: await deps.mirror.list(known) };
      } catch (e) {
        view.mirror = { entries: [], error: `the mirror could not be read: ${messageOf(e)}` };
      }
    }
    return c.json(view);
  });
  return app;
}
