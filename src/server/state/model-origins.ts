/**
 * Each model's source resolved to its origin (files, sizes, digests, the commit) and its shape
 * (read from a GGUF header or a config.json, never from the weights), stored by model name.
 * Models added through the API are refused when their source does not resolve; models declared
 * in the settings cannot be refused at start, so theirs is resolved in the background and a
 * failure is recorded as their problem.
 */
import { readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';

import type { Logger } from 'pino';

import type { ModelSpec } from '../../catalog/model-spec.js';
import { lineOfKey, SettingsError, type LoadedSettings } from '../../config/load.js';
import type { HubSettings } from '../../config/schema.js';
import { isLlmgwError, LlmgwError, messageOf, type Issue } from '../../core/errors.js';
import { hubFileUrl } from '../../models/cache-layout.js';
import { safetensorsBytes, shapeFromConfig } from '../../models/config-shape.js';
import { hubAccess, type HubAccess } from '../../models/hub.js';
import type { Origin, OriginFile } from '../../models/origin.js';
import { readGgufShape, readLocalGgufShape } from '../../models/read-gguf.js';
import { resolveOrigin } from '../../models/resolve.js';
import { known, unknown, type ModelShape } from '../../models/shape.js';
import type { OwnPath } from '../../models/local-source.js';
import { parseSource } from '../../models/source.js';
import type { ModelOriginRecord, Store } from '../../store/store.js';
import { ownData } from './own-data.js';

/** What a source resolved to; `problem` says what of it is not known, and why. */
export interface Resolution {
  source: string;
  origin: Origin | null;
  shape: ModelShape | null;
  problem: string | null;
}

export interface ModelOriginsOptions {
  store: Store;
  /** hub.endpoint and hub.token as the settings say now. */
  hub: () => HubSettings;
  /** The control plane's own files and folders as the settings say now: never a local source. */
  own?: () => readonly OwnPath[];
  /** Where HF_ENDPOINT and HF_TOKEN are read. */
  env: Record<string, string | undefined>;
  logger: Logger;
  /** The global fetch unless given. */
  fetch?: typeof fetch;
  now?: () => Date;
  /** How long one source may take to resolve, shape included. */
  timeoutMs?: number;
}

const maxRedirects = 5;

/**
 * A fetch that sends the hub token to the hub's origin only: it follows redirects itself (the
 * hub sends file downloads to another host), taking the token off at the first hop elsewhere.
 */
export function hubFetch(base: typeof fetch, access: HubAccess, signal?: AbortSignal): typeof fetch {
  const hubOrigin = new URL(access.endpoint).origin;
  const withToken = (url: string, given: RequestInit['headers']): Headers => {
    const headers = new Headers(given);
    headers.delete('authorization');
    if (access.token !== undefined && new URL(url).origin === hubOrigin)
      headers.set('authorization', `Bearer ${access.token}`);
    return headers;
  };
  return async (input, init) => {
    let url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const own = { ...init, ...(signal !== undefined && !init?.signal ? { signal } : {}) };
    if (init?.redirect === 'manual') return base(url, { ...own, headers: withToken(url, init.headers) });
    for (let hop = 0; ; hop++) {
      const res = await base(url, { ...own, headers: withToken(url, init?.headers), redirect: 'manual' });
      const location = res.headers.get('location');
      if (res.status < 300 || res.status >= 400 || location === null) return res;
      await res.body?.cancel();
      if (hop === maxRedirects) throw new Error(`${url} redirected more than ${maxRedirects} times`);
      url = new URL(location, url).href;
    }
  };
}

const isWeightGguf = (f: OriginFile) =>
  f.path.toLowerCase().endsWith('.gguf') && !basename(f.path).toLowerCase().includes('mmproj');

export class ModelOrigins {
  readonly #o: ModelOriginsOptions;
  readonly #fetch: typeof fetch;
  readonly #listeners: (() => void)[] = [];
  /** Declared models' resolutions made while vetting new settings, used once they apply (soon after). */
  readonly #vetted = new Map<string, { r: Resolution; at: number }>();
  readonly #stopping = new AbortController();
  #queue: Promise<void> = Promise.resolve();

  constructor(options: ModelOriginsOptions) {
    this.#o = options;
    this.#fetch = options.fetch ?? fetch;
  }

  /** Called whenever a declared model's record is stored (placement listens). */
  onResolved(listener: () => void): void {
    this.#listeners.push(listener);
  }

  /** The hub as the settings and the environment give it; `hub` overrides the settings (new settings being vetted). */
  access(hub: HubSettings = this.#o.hub()): HubAccess {
    return hubAccess(hub, this.#o.env);
  }

  /**
   * Resolves a source. Refused (thrown) when an hf:// or URL source does not resolve, or when a
   * local path is not a model (or is the control plane's own data); a local path this machine
   * lacks, or a shape that cannot be read, is not refused: `problem` says so. `next`: settings
   * being vetted, whose hub and own files count as well.
   */
  async resolve(source: string, next?: LoadedSettings): Promise<Resolution> {
    const access = this.access(next?.settings.hub);
    const signal = AbortSignal.any([AbortSignal.timeout(this.#o.timeoutMs ?? 60_000), this.#stopping.signal]);
    const f = hubFetch(this.#fetch, access, signal);
    const parsed = parseSource(source);
    const own = [...(this.#o.own?.() ?? []), ...(next === undefined ? [] : ownData(next))];
    let origin: Origin;
    try {
      origin = await resolveOrigin(source, { fetch: f, ...access, signal, own });
    } catch (e) {
      // A path this machine lacks may be on the nodes: its files are used in place there.
      if (parsed.kind === 'path' && isLlmgwError(e) && e.code === 'not_found')
        return { source, origin: null, shape: null, problem: notHere(parsed.path) };
      // A missing repository, file or revision is the source's fault: 400, not 404 (which
      // `ctl model apply` reads as "no such model, add it").
      if (isLlmgwError(e) && e.code === 'not_found')
        throw new LlmgwError('invalid_argument', e.message, { cause: e });
      throw e;
    }
    const { shape, problem } = await this.#shape(origin, access, f);
    return { source, origin, shape, problem };
  }

  /** Like resolve, but a refusal becomes the problem: for models that cannot be refused. */
  async settle(source: string): Promise<Resolution> {
    try {
      return await this.resolve(source);
    } catch (e) {
      return { source, origin: null, shape: null, problem: messageOf(e) };
    }
  }

  record(model: string, r: Resolution): ModelOriginRecord {
    return { model, ...r, resolved_at: (this.#o.now?.() ?? new Date()).toISOString() };
  }

  async #shape(
    origin: Origin,
    access: HubAccess,
    f: typeof fetch,
  ): Promise<{ shape: ModelShape | null; problem: string | null }> {
    try {
      const ggufs = origin.files.filter(isWeightGguf).sort((a, b) => a.path.localeCompare(b.path));
      const first = ggufs[0];
      if (first !== undefined) {
        let shape =
          origin.kind === 'path'
            ? await readLocalGgufShape(await localFile(origin, first))
            : await readGgufShape(hubFileUrl(access.endpoint, origin, first), { fetch: f });
        if (ggufs.length > 1) {
          // The first part's header lists only its own tensors: the parts' sizes say more.
          shape = {
            ...shape,
            weightBytes: known(ggufs.reduce((sum, g) => sum + g.size, 0)),
            parameters: unknown(
              `a GGUF split in ${ggufs.length} parts: only the first part's header was read`,
            ),
          };
        }
        return { shape, problem: null };
      }
      const config = origin.files.find((x) => x.path === 'config.json');
      if (config === undefined) {
        return {
          shape: null,
          problem: `${origin.source} has neither a GGUF file nor a config.json: what the model is (its shape) is unknown`,
        };
      }
      const json = await this.#json(origin, config, access, f);
      const index = origin.files.find((x) => x.path === 'model.safetensors.index.json');
      const parameters =
        index === undefined
          ? undefined
          : totalParameters(await this.#json(origin, index, access, f).catch(() => undefined));
      const bytes = safetensorsBytes(origin.files);
      const shape = shapeFromConfig({
        config: json,
        weightBytes: bytes.known ? bytes.value : undefined,
        parameters,
      });
      return { shape: bytes.known ? shape : { ...shape, weightBytes: bytes }, problem: null };
    } catch (e) {
      return {
        shape: null,
        problem: `what ${origin.source} is (its shape) could not be read: ${messageOf(e)}`,
      };
    }
  }

  async #json(origin: Origin, file: OriginFile, access: HubAccess, f: typeof fetch): Promise<unknown> {
    if (origin.kind === 'path')
      return JSON.parse(await readFile(await localFile(origin, file), 'utf8')) as unknown;
    const url = hubFileUrl(access.endpoint, origin, file);
    const res = await f(url);
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`${file.path}: the hub answered ${res.status} ${res.statusText}`.trimEnd());
    }
    try {
      return await res.json();
    } catch {
      throw new Error(`${file.path} is not JSON`);
    }
  }

  /** The record of each model by name. */
  async records(): Promise<Map<string, ModelOriginRecord>> {
    return new Map((await this.#o.store.origins.list()).map((r) => [r.model, r]));
  }

  /**
   * Refuses new settings that declare a model, new or with a changed source, whose source does
   * not resolve (with the hub of the new settings) or is a local path that is not a model,
   * before they are written.
   */
  async vet(next: LoadedSettings, before: LoadedSettings): Promise<void> {
    const was = new Map(before.settings.models.map((m) => [m.name, m.source]));
    const issues: Issue[] = [];
    const checks = next.settings.models.map(async (m, i) => {
      if (was.get(m.name) === m.source) return;
      const path = ['models', i, 'source'];
      try {
        this.#vetted.set(m.name, { r: await this.resolve(m.source, next), at: Date.now() });
      } catch (e) {
        const line = lineOfKey(next.source.text, path);
        issues.push({ path, message: messageOf(e), ...(line === undefined ? {} : { line }) });
      }
    });
    await Promise.all(checks);
    if (issues.length > 0) throw new SettingsError(next.source.path, issues);
  }

  /**
   * Resolves the declared models whose record is missing or was of another source (and, with
   * `retry`, those with a problem), one pass at a time, and stores each; never throws.
   */
  syncDeclared(models: readonly ModelSpec[], options: { retry: boolean }): Promise<void> {
    const run = this.#queue.then(() => this.#sync(models, options.retry));
    this.#queue = run.catch((e: unknown) => {
      this.#o.logger.error({ err: messageOf(e) }, 'resolving the declared models failed');
    });
    return this.#queue;
  }

  /** After the settings changed: drops the records of models no longer declared nor added, resolves the rest. */
  declaredChanged(next: readonly ModelSpec[], previous: readonly ModelSpec[]): Promise<void> {
    const kept = new Set(next.map((m) => m.name));
    const gone = previous.filter((m) => !kept.has(m.name)).map((m) => m.name);
    const run = this.#queue.then(async () => {
      for (const name of gone) {
        if ((await this.#o.store.models.get(name)) === undefined) await this.#o.store.origins.delete(name);
      }
    });
    this.#queue = run.catch(() => undefined);
    return this.syncDeclared(next, { retry: false });
  }

  async #sync(models: readonly ModelSpec[], retry: boolean): Promise<void> {
    const records = await this.records();
    for (const m of models) {
      if (this.#stopped()) return;
      const had = records.get(m.name);
      if (had !== undefined && had.source === m.source && !(retry && had.problem !== null)) continue;
      const vetted = this.#vetted.get(m.name);
      this.#vetted.delete(m.name);
      const fresh = vetted !== undefined && vetted.r.source === m.source && Date.now() - vetted.at < 300_000;
      const r = fresh ? vetted.r : await this.settle(m.source);
      if (this.#stopped()) return;
      await this.#o.store.origins.put(this.record(m.name, r));
      if (r.problem === null) {
        this.#o.logger.info(
          { model: m.name, source: m.source, commit: r.origin?.commit },
          'model source resolved',
        );
      } else {
        this.#o.logger.warn(
          { model: m.name, source: m.source, problem: r.problem },
          'model source not fully resolved',
        );
      }
      for (const l of this.#listeners) l();
    }
  }

  #stopped(): boolean {
    return this.#stopping.signal.aborted;
  }

  /** Resolves once no declared model is being resolved. */
  async idle(): Promise<void> {
    let seen: Promise<void> | undefined;
    while (seen !== this.#queue) {
      seen = this.#queue;
      await seen;
    }
  }

  /** Stops resolving (an in-flight request is aborted) and waits for the pass under way. */
  async stop(): Promise<void> {
    this.#stopping.abort(new Error('the control plane is stopping'));
    await this.idle();
  }
}

async function localFile(origin: Origin, file: OriginFile): Promise<string> {
  return (await stat(origin.source)).isDirectory()
    ? join(origin.source, ...file.path.split('/'))
    : origin.source;
}

function totalParameters(index: unknown): number | undefined {
  const n = (index as { metadata?: { total_parameters?: unknown } } | undefined)?.metadata?.total_parameters;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function notHere(path: string): string {
  return `${path} is not on the control plane's machine: its files are used in place on the nodes, and its size and shape are unknown`;
}
