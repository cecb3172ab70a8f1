/** How the API shows downloads, pulls and caches of model files; shared by the server and its clients. */
import type { CacheEntry, DownloadProgress, DownloadReport } from './agent-protocol.js';

/** `ctl model pull`: which nodes were asked to fetch the model's files. */
export interface PullStarted {
  model: string;
  /** The origin's source, and the commit it is pinned to. */
  source: string;
  commit?: string;
  nodes: string[];
}

/** One node's download of a model's files, as its agent last reported it. */
export type NodeDownload = DownloadReport & { node: string };

export interface ModelDownloads {
  model: string;
  source: string;
  commit?: string;
  /** Nodes that reported a download of this model's files (running, or ended in the last minutes). */
  nodes: NodeDownload[];
}

/** What one node's cache holds, or why it could not say. */
export interface NodeCache {
  node: string;
  root?: string;
  /** agent.models.max_gb, in bytes; absent: unbounded. */
  max_bytes?: number;
  free_bytes?: number;
  entries: CacheEntry[];
  error?: string;
}

export interface CacheView {
  nodes: NodeCache[];
  /** The control plane's mirror (absent where there is none). */
  mirror?: { root?: string; entries: CacheEntry[]; error?: string };
}

/** `ctl model rm --purge`: who was asked to remove the model's files, and what was kept. */
export interface PurgeResult {
  model: string;
  source?: string;
  /** Nodes sent the purge; each removes what no running engine uses, and logs what it kept. */
  nodes: string[];
  /** Why nothing was purged, or what was left (another model of the catalog uses the same files). */
  kept?: string;
  mirror?: string;
}

const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];

/** `4.7 GB`, `85 MB`, `512 B`: decimal units, as the hub shows sizes. */
export function bytesText(bytes: number): string {
  let v = bytes;
  let i = 0;
  // 999.6 MB reads as 1.0 GB, not 1000 MB.
  while (v >= 999.5 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  if (i === 0) return `${Math.round(v)} B`;
  // Two significant digits at least: 4.7 GB, 85 MB.
  return `${v < 9.95 ? v.toFixed(1) : String(Math.round(v))} ${units[i] ?? ''}`;
}

/** `18 s`, `4 min`, `2 h 5 min`. */
export function durationText(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 90) return `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** `3.2 GB of 4.7 GB, 85 MB/s, 18 s left`. */
export function progressText(p: DownloadProgress): string {
  const parts = [`${bytesText(p.done)} of ${bytesText(p.total)}`];
  if (p.rate_bps > 0) parts.push(`${bytesText(p.rate_bps)}/s`);
  if (p.eta_s !== undefined && p.rate_bps > 0) parts.push(`${durationText(p.eta_s)} left`);
  return parts.join(', ');
}

/** Whole percent done, never 100 before the last byte. */
export function percentDone(p: Pick<DownloadProgress, 'done' | 'total'>): number {
  if (p.total <= 0) return 0;
  const pct = Math.floor((p.done / p.total) * 100);
  return p.done >= p.total ? 100 : Math.min(pct, 99);
}
