/** The Replicas view's logic, pure: replicas and shards as rows, and a followed log's lines. */
import type { ReplicaView, ShardView } from '../api.js';
import { age, unknown } from './nodes-rows.js';

// How a download reads, in the same words as llmgw ctl (the API's views module, bundled as is).
export { bytesText, percentDone, progressText } from '../../../src/protocol/cache-views.js';
import { percentDone, progressText } from '../../../src/protocol/cache-views.js';

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
