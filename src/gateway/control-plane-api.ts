import { z } from 'zod';

import type { Requester } from '../client/failover-client.js';
import type { ScaleSignals } from '../protocol/load-report.js';
import type { RouteTable } from '../protocol/routes.js';

import type { RouteSource, UsageSink } from './services.js';

/**
 * A gateway of its own (`llmgw gateway`) reaches the control plane's state over its API:
 * routes, usage and the autoscaler's signals here, keys in ./keys.ts (remoteKeys).
 */

export function remoteRoutes(client: Requester): RouteSource {
  return {
    routeTable: async () => (await client.request<RouteTable>('GET', '/gateway/routes')).body,
  };
}

export function remoteUsage(client: Requester): UsageSink {
  return {
    write: async (rows) => {
      await client.request('POST', '/gateway/usage', { json: { rows } });
    },
  };
}

const wakeAnswer = z.union([
  z.object({ ok: z.literal(true) }),
  z.object({ ok: z.literal(false), reason: z.string() }),
]);

/** The load report and wake-ups of a gateway of its own, over the control plane's API. */
export function remoteSignals(client: Requester): ScaleSignals {
  return {
    report: async (report) => {
      await client.request('POST', '/gateway/load', { json: report });
    },
    wake: async (model) => {
      const body = (await client.request<unknown>('POST', '/gateway/wake', { json: { model } })).body;
      const answer = wakeAnswer.safeParse(body);
      if (!answer.success)
        throw new Error(
          `the control plane answered POST /gateway/wake with ${JSON.stringify(body).slice(0, 200)}, not {"ok": true} or {"ok": false, "reason": "..."}: is it an older llmgw?`,
        );
      return answer.data;
    },
  };
}
