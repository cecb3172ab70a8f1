import type { DownloadProgress } from '../../../protocol/agent-protocol.js';
import { DaemonError, readJsonLines, type DaemonClient } from './daemon.js';
import { ContainerRefusal, splitImageRef } from './requests.js';
import type { ContainerRun, DaemonKind } from './types.js';

/**
 * Images: present, or pulled with progress (shown like a model download), or refused
 * with the image's name and how to bring it to an offline node.
 */

/** Over how long the pull's rate is measured. */
const RATE_WINDOW_MS = 5000;

/**
 * Docker's pull progress, one JSON line per layer event (`{"id","status","progressDetail":
 * {"current","total"}}`), summed over layers into bytes done of total. Layers whose size
 * is not known yet count nothing; a layer `Download complete` or `Already exists` counts
 * whole.
 */
export class PullProgress {
  readonly #layers = new Map<string, { done: number; total: number }>();
  readonly #samples: { at: number; done: number }[] = [];
  readonly #now: () => number;
  /** The daemon's in-stream error (`{"error": …}`), which comes with status 200. */
  error: string | undefined;
  /** The last status line (`Pulling from vllm/vllm-openai`), for the log. */
  lastStatus: string | undefined;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Takes one JSON line of the stream; true when the numbers changed. */
  take(event: unknown): boolean {
    if (typeof event !== 'object' || event === null) return false;
    const e = event as {
      id?: unknown;
      status?: unknown;
      error?: unknown;
      errorDetail?: unknown;
      progressDetail?: unknown;
      stream?: unknown;
    };
    // API 1.48 deprecates `error` for `errorDetail.message`, which a later daemon may send alone.
    const detail = (typeof e.errorDetail === 'object' && e.errorDetail !== null ? e.errorDetail : {}) as {
      message?: unknown;
    };
    const error = typeof e.error === 'string' ? e.error : detail.message;
    if (typeof error === 'string') {
      this.error = error;
      return false;
    }
    // Podman's libpod pull writes text lines ({"stream": "Copying blob …"}), no byte counts.
    if (typeof e.stream === 'string') {
      this.lastStatus = e.stream.trim();
      return false;
    }
    if (typeof e.status !== 'string') return false;
    this.lastStatus = typeof e.id === 'string' ? `${e.id}: ${e.status}` : e.status;
    if (typeof e.id !== 'string') return false;
    const layer = this.#layers.get(e.id) ?? { done: 0, total: 0 };
    const progressDetail = (
      typeof e.progressDetail === 'object' && e.progressDetail !== null ? e.progressDetail : {}
    ) as {
      current?: unknown;
      total?: unknown;
    };
    if (e.status === 'Downloading' && typeof progressDetail.current === 'number') {
      layer.done = progressDetail.current;
      if (typeof progressDetail.total === 'number' && progressDetail.total > 0)
        layer.total = progressDetail.total;
    } else if (
      e.status === 'Download complete' ||
      e.status === 'Pull complete' ||
      e.status === 'Already exists'
    ) {
      layer.done = layer.total;
    } else if (e.status !== 'Pulling fs layer' && e.status !== 'Waiting') {
      // Extracting, Verifying Checksum: bytes already counted.
      return false;
    }
    this.#layers.set(e.id, layer);
    const done = this.#sum('done');
    const at = this.#now();
    this.#samples.push({ at, done });
    while (this.#samples.length > 2 && at - (this.#samples[1]?.at ?? at) >= RATE_WINDOW_MS)
      this.#samples.shift();
    return true;
  }

  progress(): DownloadProgress {
    const done = this.#sum('done');
    const total = Math.max(done, this.#sum('total'));
    const first = this.#samples[0];
    const last = this.#samples[this.#samples.length - 1];
    const seconds = first === undefined || last === undefined ? 0 : (last.at - first.at) / 1000;
    const rate =
      seconds > 0 && last !== undefined && first !== undefined
        ? Math.max(0, (last.done - first.done) / seconds)
        : 0;
    const out: DownloadProgress = { done, total, rate_bps: Math.round(rate) };
    if (rate > 0 && total > done) out.eta_s = Math.round((total - done) / rate);
    return out;
  }

  #sum(field: 'done' | 'total'): number {
    let n = 0;
    for (const l of this.#layers.values()) n += l[field];
    return n;
  }
}

/** How to bring an image to a node the registry cannot reach, in the daemon's own words. */
export function loadHint(kind: DaemonKind, image: string): string {
  const cli = kind === 'podman' ? 'podman' : 'docker';
  return `load it on this node with \`${cli} load -i FILE.tar\` (made where the registry is reachable with \`${cli} save -o FILE.tar ${image}\`), or point agent.containers.images or agent.containers.registry at a registry this node reaches`;
}

export function missingImageMessage(kind: DaemonKind, image: string, why: string): string {
  return `image ${image} is not on this node and ${why}; ${loadHint(kind, image)}`;
}

export async function imagePresent(client: DaemonClient, image: string): Promise<boolean> {
  try {
    if (client.kind === 'podman') {
      await client.call({ method: 'GET', path: `/images/${image}/exists` });
    } else {
      await client.call({ method: 'GET', path: `/images/${image}/json` });
    }
    return true;
  } catch (e) {
    if (e instanceof DaemonError && e.status === 404) return false;
    throw e;
  }
}

/**
 * Pulls `image`, calling `onProgress` as the numbers move; throws the daemon's error
 * (a refused or unreachable registry, a name that does not exist).
 */
export async function pullImage(
  client: DaemonClient,
  image: string,
  options: { onProgress: (p: DownloadProgress) => void; signal?: AbortSignal; now?: () => number },
): Promise<void> {
  const progress = new PullProgress(options.now);
  const common = {
    method: 'POST' as const,
    timeoutMs: 0,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  };
  const res =
    client.kind === 'podman'
      ? await client.open({ ...common, path: '/images/pull', query: { reference: image, policy: 'always' } })
      : await client.open({ ...common, path: '/images/create', query: splitImageRef(image) });
  options.onProgress(progress.progress());
  await readJsonLines(res, (event) => {
    if (progress.take(event)) options.onProgress(progress.progress());
  });
  if (progress.error !== undefined) throw new DaemonError(500, progress.error);
}

/**
 * Makes sure the run's image is on the node, as its pull policy says: `missing` pulls only
 * when absent, `always` pulls each start (keeping the local image when the registry is
 * out of reach), `never` only checks. Refused (ContainerRefusal) when the image is not
 * there and cannot come.
 */
export async function ensureImage(
  client: DaemonClient,
  run: Pick<ContainerRun, 'image' | 'pull'>,
  options: {
    onProgress: (p: DownloadProgress) => void;
    onNote: (text: string) => void;
    signal?: AbortSignal;
  },
): Promise<void> {
  const { image, pull } = run;
  const present = await imagePresent(client, image);
  if (pull === 'never') {
    if (present) return;
    throw new ContainerRefusal(missingImageMessage(client.kind, image, 'agent.containers.pull is never'));
  }
  if (pull === 'missing' && present) return;
  try {
    await pullImage(client, image, options);
  } catch (e) {
    if (options.signal?.aborted === true) throw e;
    const why = e instanceof Error ? e.message : String(e);
    if (present) {
      options.onNote(`pulling ${image} failed (${why}); using the image already on this node`);
      return;
    }
    throw new ContainerRefusal(missingImageMessage(client.kind, image, `pulling it failed: ${why}`));
  }
}
