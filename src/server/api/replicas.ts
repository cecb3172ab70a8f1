import { Hono } from 'hono';
import { z } from 'zod';

import type { ListOf } from '../../core/api-types.js';
import { LlmgwError } from '../../core/errors.js';
import type { ReplicaView, RestartResult } from '../../protocol/replica-views.js';
import type { Fleet } from '../fleets/fleet.js';
import type { Catalog } from '../state/catalog.js';
import { adminOnly, jsonBody, principalOf, type ApiEnv } from './context.js';

export interface ReplicaRouteDeps {
  fleet: Pick<Fleet, 'replicas' | 'replica' | 'restart' | 'logs'>;
}

export interface ScaleRouteDeps {
  catalog: Pick<Catalog, 'get' | 'patch'>;
}

const restartSchema = z.strictObject({ in_place: z.boolean().default(false) });
const logsQuery = z.strictObject({
  rank: z.coerce.number().int().min(0).default(0),
  tail: z.coerce.number().int().min(0).max(100_000).default(200),
  follow: z.enum(['true', 'false', '1', '0']).optional(),
});

export function replicaRoutes(deps: ReplicaRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get('/', (c) => c.json<ListOf<ReplicaView>>({ items: deps.fleet.replicas(c.req.query('model')) }));
  app.get('/:id', (c) => c.json(deps.fleet.replica(c.req.param('id'))));

  app.post('/:id/restart', adminOnly, async (c) => {
    const body =
      c.req.header('content-length') === '0' || c.req.header('content-type') === undefined
        ? { in_place: false }
        : await jsonBody(c, restartSchema);
    return c.json<RestartResult>(
      await deps.fleet.restart(c.req.param('id'), body.in_place, principalOf(c).name),
    );
  });

  // Logs can hold prompts and answers: admins only.
  app.get('/:id/logs', adminOnly, (c) => {
    const parsed = logsQuery.safeParse(c.req.query());
    if (!parsed.success)
      throw new LlmgwError(
        'invalid_argument',
        'logs take rank (0 or more), tail (lines, up to 100000) and follow (true or false)',
      );
    const { rank, tail } = parsed.data;
    const follow = parsed.data.follow === 'true' || parsed.data.follow === '1';
    const id = c.req.param('id');
    // Looked up before the stream starts, so a missing replica is a 404, not an empty stream.
    deps.fleet.replica(id);
    const abort = new AbortController();
    c.req.raw.signal.addEventListener('abort', () => abort.abort());
    const encoder = new TextEncoder();
    let started!: (error?: Error) => void;
    const first = new Promise<Error | undefined>((resolve) => (started = resolve));
    let open = true;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        // The client may go away at any moment: after that the stream takes nothing more.
        const close = () => {
          if (!open) return;
          open = false;
          controller.close();
        };
        deps.fleet
          .logs(id, {
            rank,
            tail,
            follow,
            signal: abort.signal,
            onLines: (lines) => {
              started();
              if (open) controller.enqueue(encoder.encode(lines.map((l) => `${l}\n`).join('')));
            },
          })
          .then(
            () => {
              started();
              close();
            },
            (e: unknown) => {
              started(e instanceof Error ? e : new Error(String(e)));
              close();
            },
          );
      },
      cancel() {
        open = false;
        abort.abort();
      },
    });
    return first.then((error) => {
      if (error !== undefined) throw error;
      return new Response(stream, {
        headers: {
          'content-type': 'text/plain; charset=utf-8',
          'cache-control': 'no-cache',
          'x-content-type-options': 'nosniff',
        },
      });
    });
  });

  return app;
}

const scaleSchema = z.strictObject({ replicas: z.int().min(0).max(10_000) });

/** POST /models/:name/scale: how many replicas a model runs. */
export function scaleRoute(deps: ScaleRouteDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.post('/:name/scale', adminOnly, async (c) => {
    const { replicas } = await jsonBody(c, scaleSchema);
    const name = c.req.param('name');
    const a = (await deps.catalog.get(name)).autoscale;
    if (a !== undefined)
      throw new LlmgwError(
        'conflict',
        `model ${name} is autoscaled between ${a.min} and ${a.max} replicas: change the bounds with llmgw ctl model autoscale ${name} --min N --max N, or run a fixed count with llmgw ctl model autoscale ${name} --off first`,
      );
    const model = await deps.catalog.patch(name, { replicas }, principalOf(c).name);
    return c.json(model);
  });
  return app;
}
