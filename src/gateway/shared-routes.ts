import type { RouteTable } from '../protocol/routes.js';

import type { RouteSource } from './services.js';

/** One read of the route table shared by the callers within `ms` (the primary's gateway and its workers' pool). */
export function sharedRoutes(source: RouteSource, ms = 250): RouteSource {
  let last: { at: number; table: Promise<RouteTable> } | undefined;
  return {
    routeTable: () => {
      const now = Date.now();
      if (last === undefined || now - last.at >= ms) {
        const table = source.routeTable();
        last = { at: now, table };
        // A failure is not kept: the next caller reads again.
        table.catch(() => {
          if (last?.table === table) last = undefined;
        });
      }
      return last.table;
    },
  };
}
