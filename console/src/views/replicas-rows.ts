/** The Replicas view's logic, pure: replicas and shards as rows, and a followed log's lines. */
import type { ReplicaView, ShardView } from '../api.js';
import { age, unknown } from './nodes-rows.js';

type Download = NonNullable<ReplicaView['download']>;

/** Whole percent done, never 100 before the last byte (as ctl says it). */
export function percentDone(p: Pick<Download, 'done' | 'total'>): number {
  if (p.total <= 0) return 0;
  const pct = Math.floor((p.done / p.total) * 100);
  return p.done >= p.total ? 100 : Math.min(pct, 99);
}

const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];

/** `4.7 GB`, `85 MB`: decimal units, as the hub shows sizes. */
export function bytesText(bytes: number): string {
  let v = bytes;
  let i = 0;
  while (v >= 999.5 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  if (i === 0) return `${Math.round(v)} B`;
  return `${v < 9.95 ? v.toFixed(1) : String(Math.round(v))} ${units[i] ?? ''}`;
}

/** `3.2 GB of 4.7 GB, 85 MB/s, 18 s left`. */
export function progressText(p: Download): string {
  const parts = [`${bytesText(p.done)} of ${bytesText(p.total)}`];
  if (p.rate_bps > 0) parts.push(`${bytesText(p.rate_bps)}/s`);
  if (p.eta_s !== undefined && p.rate_bps > 0) {
    const s = Math.max(0, Math.round(p.eta_s));
    const m = Math.round(s / 60);
    parts.push(`${s < 90 ? `${s} s` : m < 90 ? `${m} min` : `${Math.floor(m / 60)} h ${m % 60} min`} left`);
  }
  return parts.join(', ');
}

/** A shard's devices: `0,1`, `0/mig1`, or the CPU threads it runs on. */
export function shardDevices(s: Pick<ShardView, 'devices' | 'threads'>): string {
  if (s.devices.length > 0) return s.devices.join(', ');
  return s.threads === undefined ? 'cpu' : `cpu (${s.threads} thread${s.threads === 1 ? '' : 's'})`;
}

/** All shards' devices; a replica over several nodes names each node. */
export function replicaDevices(r: Pick<ReplicaView, 'shards'>): string {
  if (r.shards.length === 0) return unknown;
  if (r.shards.length === 1 && r.shards[0] !== undefined) return shardDevices(r.shards[0]);
  return r.shards.map((s) => `${s.node}: ${shardDevices(s)}`).join('; ');
}

export interface ReplicaRow {
  /** React's key: a pending replica has no id. */
  key: string;
  id: string | null;
  model: string;
  profile: string;
  state: ReplicaView['state'];
  /** `downloading 42%`, `ready (replaced)`. */
  stateText: string;
  /** 0 to 1 while downloading. */
  progress?: number;
  progressText?: string;
  reason?: string;
  node: string;
  devices: string;
  restarts: number;
  readySince: string;
  endpoint: string;
  retiring: boolean;
}

export function replicaRow(r: ReplicaView, index: number, now: number): ReplicaRow {
  const state =
    r.state === 'downloading' && r.download !== undefined
      ? `downloading ${percentDone(r.download)}%`
      : r.state;
  return {
    key: r.id ?? `pending-${r.model}-${index}`,
    id: r.id,
    model: r.model,
    profile: r.profile ?? unknown,
    state: r.state,
    stateText: r.retiring === true ? `${state} (replaced)` : state,
    ...(r.download === undefined
      ? {}
      : {
          progress: r.download.total > 0 ? Math.min(1, r.download.done / r.download.total) : 0,
          progressText: progressText(r.download),
        }),
    ...(r.reason === undefined ? {} : { reason: r.reason }),
    node: r.node ?? unknown,
    devices: replicaDevices(r),
    restarts: r.restarts,
    readySince: r.ready_since === undefined ? unknown : `${age(r.ready_since, now)} ago`,
    endpoint: r.endpoint ?? unknown,
    retiring: r.retiring === true,
  };
}

/**
 * The lines of a followed log, kept to the last `max`: chunks arrive cut anywhere, so a line
 * is whole only once its newline comes; the part after the last newline shows as it grows.
 */
export class LogLines {
  readonly #max: number;
  #lines: string[] = [];
  #partial = '';

  constructor(max = 2000) {
    this.#max = max;
  }

  push(chunk: string): void {
    const parts = (this.#partial + chunk).split('\n');
    this.#partial = parts.pop() ?? '';
    this.#lines.push(...parts);
    if (this.#lines.length > this.#max) this.#lines.splice(0, this.#lines.length - this.#max);
  }

  /** The text to show: whole lines, then the line still coming. */
  text(): string {
    const whole = this.#lines.join('\n');
    if (this.#partial === '') return whole;
    return whole === '' ? this.#partial : `${whole}\n${this.#partial}`;
  }
}
