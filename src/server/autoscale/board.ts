import type { GatewayLoadReport } from '../../protocol/load-report.js';

/**
 * The gateways' latest load reports, one per gateway id (a newer report replaces the last of
 * the same gateway); a report older than `ttlMs` is left out, so a gateway that stopped
 * reporting stops counting within a few seconds.
 */
export class LoadBoard {
  readonly #reports = new Map<string, { report: GatewayLoadReport; receivedAt: number }>();

  put(report: GatewayLoadReport, now: number): void {
    this.#reports.set(report.gateway, { report, receivedAt: now });
  }

  /** The reports received within `ttlMs` of `now`; older ones are dropped. */
  fresh(now: number, ttlMs: number): GatewayLoadReport[] {
    const out: GatewayLoadReport[] = [];
    for (const [id, r] of this.#reports) {
      if (now - r.receivedAt > ttlMs) this.#reports.delete(id);
      else out.push(r.report);
    }
    return out;
  }
}

/**
 * Reports from several boards (this control plane's and, in HA, the others' shared through the
 * store): one per gateway, the newest by its own time, none older than `ttlMs` by that time.
 */
export function mergeReports(
  lists: readonly (readonly GatewayLoadReport[])[],
  now: number,
  ttlMs: number,
): GatewayLoadReport[] {
  const by = new Map<string, GatewayLoadReport>();
  for (const list of lists)
    for (const r of list) {
      if (now - r.at > ttlMs) continue;
      const had = by.get(r.gateway);
      if (had === undefined || r.at > had.at) by.set(r.gateway, r);
    }
  return [...by.values()];
}
