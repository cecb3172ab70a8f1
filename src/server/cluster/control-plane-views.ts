import type { ControlPlaneView } from '../../protocol/node-views.js';
import type { Store } from '../../store/store.js';

import { leaderLease } from './leadership.js';

/** The control planes as `ctl status` shows them: the leader first, then by start. */
export async function controlPlaneViews(
  store: Store,
  o: { self: string; leaseMs: number; now?: number },
): Promise<ControlPlaneView[]> {
  const [records, lease] = await Promise.all([
    store.cluster.controlPlanes(),
    store.cluster.lease(leaderLease),
  ]);
  const now = o.now ?? Date.now();
  const leaseLive = lease !== undefined && Date.parse(lease.expires_at) > now;
  const views = records.map((r): ControlPlaneView => {
    const leads = leaseLive && lease.holder === r.id;
    return {
      id: r.id,
      url: r.url,
      version: r.version,
      started_at: r.started_at,
      seen_at: r.seen_at,
      state: now - Date.parse(r.seen_at) > 3 * o.leaseMs ? 'silent' : 'serving',
      leader: leads,
      ...(leads ? { leader_since: lease.since, term: lease.token } : {}),
      self: r.id === o.self,
    };
  });
  return views.sort(
    (a, b) => Number(b.leader) - Number(a.leader) || a.started_at.localeCompare(b.started_at),
  );
}
