import type { DownloadProgress } from '../../../protocol/agent-protocol.js';
import { progressText } from '../../../protocol/cache-views.js';
import type { ReplicaState, ShardView } from '../../../protocol/replica-views.js';

/** A replica's state from its shards' states: the worst of them, in this order. */
export function aggregate(shards: readonly ShardView[]): {
  state: ReplicaState;
  reason?: string;
  download?: DownloadProgress;
  restart_at?: string;
} {
  if (shards.length === 0) return { state: 'pending', reason: 'not placed' };
  const worst = (states: readonly string[]) => shards.find((s) => states.includes(s.state));
  const failed = worst(['failed']);
  if (failed !== undefined) {
    const restartAt = restartOf(shards.filter((s) => s.state === 'failed'));
    return {
      state: 'failed',
      ...(failed.reason === undefined ? {} : { reason: failed.reason }),
      ...(restartAt === undefined ? {} : { restart_at: restartAt }),
    };
  }
  const unknown = worst(['unknown']);
  if (unknown !== undefined)
    return { state: 'unknown', ...(unknown.reason === undefined ? {} : { reason: unknown.reason }) };
  // Waiting for its files on any node: the engine cannot start before they are all there.
  const downloading = shards.filter((s) => s.state === 'downloading');
  if (downloading.length > 0) return downloadingOf(downloading);
  const starting = worst(['starting', 'stopping']);
  if (starting !== undefined)
    return { state: 'starting', ...(starting.reason === undefined ? {} : { reason: starting.reason }) };
  const degraded = worst(['degraded']);
  if (degraded !== undefined)
    return { state: 'degraded', ...(degraded.reason === undefined ? {} : { reason: degraded.reason }) };
  return { state: 'ready' };
}

/**
 * A replica downloading on some of its shards: the bytes of all of them summed, at their
 * rates together, done when the slowest is; one shard's own words, or the sum's for several.
 */
function downloadingOf(shards: readonly ShardView[]): {
  state: 'downloading';
  reason?: string;
  download?: DownloadProgress;
} {
  const reports = shards.map((s) => s.download).filter((d): d is DownloadProgress => d !== undefined);
  const first = shards[0];
  if (reports.length === 0)
    return { state: 'downloading', ...(first?.reason === undefined ? {} : { reason: first.reason }) };
  const etas = reports.map((d) => d.eta_s);
  const download: DownloadProgress = {
    done: reports.reduce((n, d) => n + d.done, 0),
    total: reports.reduce((n, d) => n + d.total, 0),
    rate_bps: reports.reduce((n, d) => n + d.rate_bps, 0),
    ...(etas.every((e) => e !== undefined) ? { eta_s: Math.max(...etas) } : {}),
  };
  const reason =
    shards.length === 1
      ? first?.reason
      : `downloading on ${new Set(shards.map((s) => s.node)).size} nodes (${progressText(download)})`;
  return { state: 'downloading', ...(reason === undefined ? {} : { reason }), download };
}

/**
 * When a replica whose shards failed has them all started again by their agents: the latest
 * of their restarts; undefined when one of them will not start again by itself.
 */
function restartOf(failed: readonly ShardView[]): string | undefined {
  let latest: string | undefined;
  for (const s of failed) {
    if (s.restart_at === undefined) return undefined;
    if (latest === undefined || Date.parse(s.restart_at) > Date.parse(latest)) latest = s.restart_at;
  }
  return latest;
}
