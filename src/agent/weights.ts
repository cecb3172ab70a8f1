import { existsSync, readFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';

import type { Logger } from 'pino';

import { writeFileAtomic } from '../config/write.js';
import { messageOf } from '../core/errors.js';
import { evictCache, listCache, purgeOrigin } from '../models/cache.js';
import { blobKey, hubFileUrl, originLayout } from '../models/cache-layout.js';
import {
  ModelFetcher,
  type FetchJob,
  type FetchResult,
  type ModelFetcherOptions,
} from '../models/model-fetcher.js';
import type { Origin } from '../models/origin.js';
import {
  nodeIdHeader,
  type AgentMessage,
  type CacheEntry,
  type DownloadProgress,
  type DownloadReport,
  type WeightsSettingsWire,
} from '../protocol/agent-protocol.js';
import { bytesText, durationText, progressText } from '../protocol/cache-views.js';

export interface AgentWeightsOptions {
  dataDir: string;
  logger: Logger;
  /** The control plane (the mirror's address), this node's credential and id, as they are now. */
  controlPlane: () => { url: string; credential?: string | undefined; nodeId?: string | undefined };
  /** agent.models.max_gb, in bytes; undefined: only the disk bounds the cache. */
  maxBytes?: number | undefined;
  send: (m: AgentMessage) => boolean;
  /** The fetched files of the shards assigned to this node now: never evicted nor purged. */
  assigned: () => readonly { model: string; origin: Origin }[];
  /** Downloads a shard waits for moved on: report the shards again. */
  onProgress: () => void;
  /** A download ended, or one that failed is due again: apply the assignment again. */
  onSettled: () => void;
  /** The fetcher's own knobs (free disk, connections, retries), for tests. */
  fetcher?: Omit<ModelFetcherOptions, 'root' | 'logger'>;
  /** Between attempts of a download that failed (doubling from initialMs, up to maxMs). */
  retry?: { initialMs: number; maxMs: number };
  /** How often progress is reported while any download runs (default 1 s). */
  reportMs?: number;
}

/** What a shard's engine has of its model's files: there, on the way, or failed. */
export type WeightsNeed =
  { ready: FetchResult } | { downloading: DownloadProgress; reason: string } | { failed: string };

interface Download {
  key: string;
  origin: Origin;
  /** Models that want these files: assigned shards' and pulls'. */
  models: Set<string>;
  job: FetchJob;
  result?: FetchResult;
  error?: string;
  /** Attempts that failed in a row. */
  failures: number;
  retryAt?: number;
  endedAt?: number;
}

/** What the agent keeps of its cache between runs: when each snapshot was last used, and for which models. */
interface Usage {
  snapshots: Record<string, { last_used?: string; models?: string[] }>;
}

/** How long a download that ended stays in `downloads` reports. */
const keepEndedMs = 10 * 60_000;

/** One origin (pinned) is one download, whichever shards and pulls want it. */
function originKey(o: Origin): string {
  return `${o.source}@${o.commit ?? o.revision}`;
}

/**
 * The model files on this node: fetched into the Hugging Face cache layout under
 * DATA_DIR/models/hub, through the control plane's mirror or from the hub, once per origin
 * however many shards and pulls want it; reported as they arrive; marked when an engine
 * starts on them; bounded by agent.models.max_gb; listed and purged on the control plane's
 * word.
 */
export class AgentWeights {
  readonly #o: AgentWeightsOptions;
  readonly #root: string;
  readonly #fetcher: ModelFetcher;
  readonly #downloads = new Map<string, Download>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #settings: WeightsSettingsWire | undefined;
  #ticker: NodeJS.Timeout | undefined;
  #evicting: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(options: AgentWeightsOptions) {
    this.#o = options;
    this.#root = join(options.dataDir, 'models', 'hub');
    this.#fetcher = new ModelFetcher({ ...options.fetcher, root: this.#root, logger: options.logger });
  }

  /** The cache root: HF_HUB_CACHE of the engines. */
  get root(): string {
    return this.#root;
  }

  get usageFile(): string {
    return join(this.#o.dataDir, 'agent', 'cache-usage.json');
  }

  /** Where files come from, as the last assignment said. */
  configure(settings: WeightsSettingsWire | undefined): void {
    this.#settings = settings;
  }

  /** The files of a model's shard: there, being fetched (started now if need be), or failed. */
  need(model: string, origin: Origin): WeightsNeed {
    const d = this.#ensure(model, origin, false);
    return this.#needOf(d);
  }

  /** As need(), without starting anything: for reports between assignments. */
  status(origin: Origin): WeightsNeed | undefined {
    const d = this.#downloads.get(originKey(origin));
    return d === undefined ? undefined : this.#needOf(d);
  }

  /** `ctl model pull`: fetches now, for no shard; shares a download a shard started. */
  pull(model: string, origin: Origin): void {
    if (origin.kind === 'path') return;
    this.#ensure(model, origin, true);
    this.#sendDownloads();
  }

  /** Every download running and those ended in the last minutes, one report per model that wants it. */
  downloads(): DownloadReport[] {
    const now = Date.now();
    const out: DownloadReport[] = [];
    for (const d of this.#downloads.values()) {
      if (d.endedAt !== undefined && now - d.endedAt > keepEndedMs) continue;
      const p = d.job.progress();
      for (const model of d.models)
        out.push({
          model,
          source: d.origin.source,
          ...(d.origin.commit === undefined ? {} : { commit: d.origin.commit }),
          state: d.result !== undefined ? 'done' : d.job.state === 'done' ? 'verifying' : d.job.state,
          ...p,
          ...(d.error === undefined ? {} : { error: d.error }),
        });
    }
    return out;
  }

  /** Notes that an engine starts on an origin's files: the cache keeps the most recently used. */
  markUsed(origin: Origin, model: string): void {
    const layout = originLayout(this.#root, origin);
    if (layout === undefined) return;
    const usage = this.#usage();
    const key = relative(this.#root, layout.snapshotDir);
    const entry = usage.snapshots[key] ?? {};
    usage.snapshots[key] = {
      last_used: new Date().toISOString(),
      models: [...new Set([...(entry.models ?? []), model])].sort(),
    };
    this.#saveUsage(usage);
  }

  /**
   * Keeps the cache within agent.models.max_gb: files of models the catalog no longer names
   * first, least recently used first, never those of an assigned shard or a download.
   */
  evict(): Promise<void> {
    const maxBytes = this.#o.maxBytes;
    if (maxBytes === undefined) return Promise.resolve();
    this.#evicting = this.#evicting.then(async () => {
      try {
        const usage = this.#usage();
        const lastUsed = new Map<string, number>();
        for (const [snapshot, u] of Object.entries(usage.snapshots))
          if (u.last_used !== undefined) lastUsed.set(join(this.#root, snapshot), Date.parse(u.last_used));
        const r = await evictCache(this.#root, {
          maxBytes,
          inUse: this.#inUse(),
          catalogBlobs: new Set(this.#settings?.catalog_blobs ?? []),
          lastUsed,
        });
        if (r.removed.length > 0)
          this.#o.logger.info(
            { removed: r.removed.map((x) => x.blob), freed: r.freed, max_bytes: maxBytes },
            `removed ${r.removed.length} cached model file${r.removed.length === 1 ? '' : 's'} (${bytesText(r.freed)}) to keep the cache within agent.models.max_gb`,
          );
        if (r.still_over !== undefined)
          this.#o.logger.warn(
            { over: r.still_over, max_bytes: maxBytes },
            `the model cache is ${bytesText(r.still_over)} over agent.models.max_gb (${bytesText(maxBytes)}): the rest is in use by engines or downloads, or was placed by hand`,
          );
      } catch (e) {
        this.#o.logger.warn(
          { err: messageOf(e) },
          'could not keep the model cache within agent.models.max_gb',
        );
      }
    });
    return this.#evicting;
  }

  /** Answers cache_list: what the cache holds, by snapshot. */
  async cacheList(request: string): Promise<void> {
    const usage = this.#usage();
    let entries: CacheEntry[] = [];
    let error: string | undefined;
    try {
      const lastUsed = new Map<string, number>();
      for (const [snapshot, u] of Object.entries(usage.snapshots))
        if (u.last_used !== undefined) lastUsed.set(join(this.#root, snapshot), Date.parse(u.last_used));
      const modelsByBlob = new Map<string, string[]>();
      const add = (origin: Origin, models: Iterable<string>) => {
        for (const f of origin.files) {
          const key = blobKey(origin, f);
          modelsByBlob.set(key, [...new Set([...(modelsByBlob.get(key) ?? []), ...models])]);
        }
      };
      for (const d of this.#downloads.values()) add(d.origin, d.models);
      for (const shard of this.#o.assigned()) add(shard.origin, [shard.model]);
      entries = (await listCache(this.#root, { modelsByBlob, lastUsed })).map(({ snapshotDir, ...e }) => {
        // The models the node was told of before (kept across restarts), and those it knows now.
        const known = usage.snapshots[relative(this.#root, snapshotDir)]?.models ?? [];
        return { ...e, models: [...new Set([...e.models, ...known])].sort() };
      });
    } catch (e) {
      error = `could not read the cache at ${this.#root}: ${messageOf(e)}`;
    }
    let free: number | undefined;
    try {
      const s = await statfs(existsSync(this.#root) ? this.#root : this.#o.dataDir);
      free = s.bavail * s.bsize;
    } catch {
      // The free space is a detail of the answer; the list stands without it.
    }
    this.#o.send({
      type: 'cache',
      request,
      entries,
      root: this.#root,
      ...(this.#o.maxBytes === undefined ? {} : { max_bytes: this.#o.maxBytes }),
      ...(free === undefined ? {} : { free_bytes: free }),
      ...(error === undefined ? {} : { error }),
    });
  }

  /** `ctl model rm --purge`: removes these origins' files, but those of an assigned shard; says what it kept. */
  async purge(model: string, origins: readonly Origin[]): Promise<void> {
    // A download no assigned shard waits for stops first: its files go too.
    for (const origin of origins) {
      const key = originKey(origin);
      const d = this.#downloads.get(key);
      if (d === undefined || this.#o.assigned().some((a) => originKey(a.origin) === key)) continue;
      d.job.cancel();
      this.#downloads.delete(key);
    }
    const inUse = this.#inUse();
    for (const origin of origins) {
      if (origin.kind === 'path') continue;
      const users = this.#o
        .assigned()
        .filter((a) => originKey(a.origin) === originKey(origin))
        .map((a) => a.model);
      if (users.length > 0) {
        // Its snapshot too: an engine restarted there reads its files through it.
        this.#o.logger.warn(
          { model, source: origin.source, kept_for: users },
          `kept the files of ${origin.source} (model ${model} was removed): ${[...new Set(users)].join(', ')} runs on them here`,
        );
        continue;
      }
      try {
        const r = await purgeOrigin(this.#root, origin, inUse);
        const layout = originLayout(this.#root, origin);
        if (layout !== undefined) {
          const gone = relative(this.#root, layout.snapshotDir);
          const usage = this.#usage();
          this.#saveUsage({
            snapshots: Object.fromEntries(Object.entries(usage.snapshots).filter(([k]) => k !== gone)),
          });
        }
        const said = `purged the files of model ${model} (${origin.source}): removed ${r.removed.length} file${r.removed.length === 1 ? '' : 's'} (${bytesText(r.freed)})`;
        if (r.kept.length > 0)
          this.#o.logger.warn(
            { model, source: origin.source, removed: r.removed, kept: r.kept },
            `${said}; kept ${r.kept.map((k) => `${k.path} (${k.reason})`).join(', ')}`,
          );
        else this.#o.logger.info({ model, source: origin.source, removed: r.removed }, said);
      } catch (e) {
        this.#o.logger.error(
          { model, source: origin.source, err: messageOf(e) },
          `could not purge the files of model ${model}`,
        );
      }
    }
    this.#sendDownloads();
  }

  /** Stops every download (partial files stay, resumed on the next start); resolves once none writes any more. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#ticker !== undefined) clearInterval(this.#ticker);
    this.#ticker = undefined;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    const jobs = [...this.#downloads.values()].map((d) => d.job);
    for (const job of jobs) job.cancel();
    await Promise.allSettled(jobs.map((job) => job.done));
  }

  #needOf(d: Download): WeightsNeed {
    if (d.result !== undefined) return { ready: d.result };
    if (d.job.state === 'failed') {
      const wait = Math.max(0, (d.retryAt ?? Date.now()) - Date.now());
      return { failed: `${failure(d.origin.source, d.error)}; trying again in ${durationText(wait / 1000)}` };
    }
    const p = d.job.progress();
    const state = d.job.state;
    const reason =
      state === 'queued'
        ? `waiting to download ${d.origin.source} (${bytesText(p.total)})`
        : state === 'downloading'
          ? `downloading ${d.origin.source} (${progressText(p)})`
          : `verifying ${d.origin.source} (${bytesText(p.total)})`;
    return { downloading: p, reason };
  }

  /** The download of an origin: the one there is, started again when it failed and its time came, or a new one. */
  #ensure(model: string, origin: Origin, pulled: boolean): Download {
    const key = originKey(origin);
    let d = this.#downloads.get(key);
    const due = d !== undefined && d.job.state === 'failed' && (pulled || Date.now() >= (d.retryAt ?? 0));
    // Files gone since (evicted, removed by hand): fetched again.
    const gone = d?.result !== undefined && !Object.values(d.result.paths).every((p) => existsSync(p));
    if (d === undefined || due || gone) d = this.#start(origin, d);
    d.models.add(model);
    return d;
  }

  #start(origin: Origin, before: Download | undefined): Download {
    const key = originKey(origin);
    const job = this.#fetcher.ensure(origin, (file) => this.#where(origin, file));
    const d: Download = {
      key,
      origin,
      models: new Set(before?.models ?? []),
      job,
      failures: before?.failures ?? 0,
    };
    this.#downloads.set(key, d);
    this.#tick();
    job.done.then(
      (result) => {
        if (this.#downloads.get(key) !== d) return;
        d.result = result;
        d.endedAt = Date.now();
        d.failures = 0;
        this.#ended();
        void this.evict();
      },
      (e: unknown) => {
        if (this.#downloads.get(key) !== d || this.#stopped) return;
        d.error = job.error ?? messageOf(e);
        d.endedAt = Date.now();
        d.failures++;
        const retry = this.#o.retry ?? { initialMs: 10_000, maxMs: 10 * 60_000 };
        const delay = Math.min(retry.maxMs, retry.initialMs * 2 ** Math.min(d.failures - 1, 20));
        d.retryAt = Date.now() + delay;
        this.#o.logger.warn(
          { source: origin.source, err: d.error, retry_in_ms: delay },
          `could not fetch ${origin.source}`,
        );
        const t = setTimeout(() => {
          this.#timers.delete(t);
          this.#o.onSettled();
        }, delay);
        t.unref();
        this.#timers.add(t);
        this.#ended();
      },
    );
    return d;
  }

  /** A download ended: said at once, and the assignment applied again. */
  #ended(): void {
    if (this.#stopped) return;
    this.#sendDownloads();
    this.#o.onSettled();
  }

  /** While any download runs, its progress is reported every second or so (never per chunk). */
  #tick(): void {
    if (this.#ticker !== undefined) return;
    this.#ticker = setInterval(() => {
      const running = [...this.#downloads.values()].some(
        (d) => d.result === undefined && d.job.state !== 'failed',
      );
      if (!running) {
        clearInterval(this.#ticker);
        this.#ticker = undefined;
        return;
      }
      this.#sendDownloads();
      this.#o.onProgress();
    }, this.#o.reportMs ?? 1000);
    this.#ticker.unref();
  }

  #sendDownloads(): void {
    if (this.#stopped) return;
    this.#o.send({ type: 'downloads', downloads: this.downloads() });
  }

  /**
   * Where a file comes from: the control plane's mirror with the node's credential, or the
   * hub with its token (sent to the hub only, never to a plain URL).
   */
  #where(
    origin: Origin,
    file: Origin['files'][number],
  ): { url: string; headers?: Record<string, string>; connections?: number } {
    const w = this.#settings ?? {
      mirror: false,
      hub_endpoint: process.env['HF_ENDPOINT'] ?? 'https://huggingface.co',
      catalog_blobs: [],
    };
    if (w.mirror) {
      const cp = this.#o.controlPlane();
      return {
        url: `${cp.url.replace(/\/+$/, '')}/api/v1/mirror/blobs/${blobKey(origin, file)}`,
        // One connection from the mirror: it serves the bytes in order as they arrive from the hub,
        // and one stream on a LAN goes at the disk's pace (several only help across the internet).
        connections: 1,
        ...(cp.credential === undefined
          ? {}
          : {
              headers: {
                authorization: `Bearer ${cp.credential}`,
                ...(cp.nodeId === undefined ? {} : { [nodeIdHeader]: cp.nodeId }),
              },
            }),
      };
    }
    const url = hubFileUrl(w.hub_endpoint, origin, file);
    return origin.kind === 'hf' && w.hub_token !== undefined
      ? { url, headers: { authorization: `Bearer ${w.hub_token}` } }
      : { url };
  }

  /** Blob keys never removed: assigned shards' files, and those of downloads running. */
  #inUse(): Set<string> {
    const keys = new Set(this.#fetcher.fetching());
    for (const { origin: o } of this.#o.assigned()) for (const f of o.files) keys.add(blobKey(o, f));
    for (const d of this.#downloads.values())
      if (d.result === undefined && d.job.state !== 'failed')
        for (const f of d.origin.files) keys.add(blobKey(d.origin, f));
    return keys;
  }

  #usage(): Usage {
    try {
      const parsed = JSON.parse(readFileSync(this.usageFile, 'utf8')) as Partial<Usage>;
      return { snapshots: parsed.snapshots ?? {} };
    } catch {
      return { snapshots: {} };
    }
  }

  #saveUsage(usage: Usage): void {
    try {
      writeFileAtomic(this.usageFile, JSON.stringify(usage));
    } catch (e) {
      this.#o.logger.warn(
        { err: messageOf(e), file: this.usageFile },
        'could not note when model files were used',
      );
    }
  }
}

/** Why a download failed, naming its source once: the fetcher's words mostly name it already. */
function failure(source: string, error = 'no reason was given'): string {
  if (error.startsWith(`${source}: `)) return `could not fetch ${error}`;
  if (error.startsWith(source)) return error;
  return `could not fetch ${source}: ${error}`;
}

/** llama.cpp's vision projector among a model's GGUF files. */
export function isProjector(path: string): boolean {
  return basename(path).toLowerCase().includes('mmproj');
}
