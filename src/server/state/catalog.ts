import { isDeepStrictEqual } from 'node:util';

import type { ModelSpec } from '../../catalog/model-spec.js';
import { validateModel } from '../../catalog/validate.js';
import { didYouMean } from '../../core/did-you-mean.js';
import { formatIssues, LlmgwError, type Issue } from '../../core/errors.js';
import { clientText } from '../../core/redact.js';
import { engines } from '../../engines/registry.js';
import type { Origin } from '../../models/origin.js';
import type { ModelStatus, ModelView } from '../../protocol/model-views.js';
import type { ModelOriginRecord, Store, StoredModel } from '../../store/store.js';

import { refuseUnsplitHeads } from './unsplit-heads.js';
import type { ModelOrigins, Resolution } from './model-origins.js';

export interface CatalogOptions {
  store: Store;
  /** Resolves a model's source before it is written. */
  origins: ModelOrigins;
  /** The models the settings file declares, as they are now. */
  declared: () => readonly ModelSpec[];
  /** The settings file, named in refusals. */
  settingsPath: () => string;
}

type ChangeListener = () => void;

/**
 * The catalog as users see it: models declared in the settings file (read-only here)
 * and models added through the API (in the store), one namespace. Each is shown with what
 * its source resolved to (`status`); a model added, or given a new source, is refused when
 * its source does not resolve, and nothing is written.
 */
export class Catalog {
  readonly #o: CatalogOptions;
  readonly #listeners: ChangeListener[] = [];

  constructor(options: CatalogOptions) {
    this.#o = options;
  }

  /** Called after every change made through the catalog (placement listens). */
  onChange(listener: ChangeListener): void {
    this.#listeners.push(listener);
  }

  #changed<T>(value: T): T {
    for (const l of this.#listeners) l();
    return value;
  }

  async list(): Promise<ModelView[]> {
    const [stored, records] = await Promise.all([this.#o.store.models.list(), this.#o.origins.records()]);
    const views = [
      ...this.#o.declared().map((m) => declaredView(m, records.get(m.name))),
      ...stored.map((m) => storedView(m, records.get(m.spec.name))),
    ];
    return views.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Every model's spec, declared and stored (placement reads them on every pass: no status). */
  async specs(): Promise<ModelSpec[]> {
    const stored = (await this.#o.store.models.list()).map((m) => m.spec);
    return [...this.#o.declared().map((m) => ({ ...m })), ...stored].sort((a, b) =>
      a.name.localeCompare(b.name),
    );
  }

  /**
   * The origins of the models of the catalog, by name: only those resolved for the source each
   * has now (placement sends them with each shard; a model missing here has none yet).
   */
  async origins(): Promise<Map<string, Origin>> {
    const out = new Map<string, Origin>();
    for (const m of await this.list()) if (m.status.origin !== undefined) out.set(m.name, m.status.origin);
    return out;
  }

  /** One model's origin, as `origins()`. */
  async origin(name: string): Promise<Origin | undefined> {
    return (await this.get(name)).status.origin;
  }

  async get(name: string): Promise<ModelView> {
    const declared = this.#declared(name);
    if (declared !== undefined) return declaredView(declared, await this.#o.store.origins.get(name));
    const stored = await this.#o.store.models.get(name);
    if (stored !== undefined) return storedView(stored, await this.#o.store.origins.get(name));
    throw await this.#notFound(name);
  }

  async add(input: unknown, actor: string): Promise<ModelView> {
    const { spec, resolved } = await this.#checkedNew(input);
    const record = this.#o.origins.record(spec.name, resolved);
    const stored = await this.#o.store.transaction(async (tx) => {
      const created = await tx.models.create(spec, actor);
      await tx.origins.put(record);
      return created;
    });
    return this.#changed(storedView(stored, record));
  }

  /**
   * A model as `add` would store it, refused as `add` refuses it, nothing written: its spec
   * and what its source resolved to (`ctl model add --dry-run`).
   */
  async preview(input: unknown): Promise<{ spec: ModelSpec; origin: Origin | undefined }> {
    const { spec, resolved } = await this.#checkedNew(input);
    return { spec, origin: resolved.origin ?? undefined };
  }

  /** A new model checked as `add` checks it, its source resolved; refused as add refuses. */
  async #checkedNew(input: unknown): Promise<{ spec: ModelSpec; resolved: Resolution }> {
    const spec = validated(input);
    if (this.#declared(spec.name) !== undefined) {
      throw new LlmgwError(
        'conflict',
        `model "${spec.name}" is already declared in the settings file ${this.#o.settingsPath()}: pick another name, or change it there with llmgw ctl config edit`,
      );
    }
    // Refused before the hub is asked anything.
    if ((await this.#o.store.models.get(spec.name)) !== undefined) {
      throw new LlmgwError(
        'conflict',
        `model "${spec.name}" already exists: change it with llmgw ctl model apply -f FILE, or pick another name`,
      );
    }
    const resolved = await this.#o.origins.resolve(spec.source);
    refuseUnsplitHeads(spec, resolved.shape);
    return { spec, resolved };
  }

  /** Replaces a stored model's spec; `expectVersion` refuses if it changed since read. */
  async replace(name: string, input: unknown, actor: string, expectVersion?: number): Promise<ModelView> {
    this.#refuseDeclared(name);
    const spec = validated(input);
    if (spec.name !== name) {
      throw new LlmgwError(
        'invalid_argument',
        `the body names model "${spec.name}" but the URL names "${name}": a model cannot be renamed; add it under the new name and remove the old one`,
      );
    }
    if ((await this.#o.store.models.get(name)) === undefined) throw await this.#notFound(name);
    return this.#write(name, () => spec, { actor, expectVersion }, spec.source);
  }

  /** Applies a JSON merge patch (RFC 7386) under the row lock, validating the result. */
  async patch(name: string, patch: unknown, actor: string, expectVersion?: number): Promise<ModelView> {
    this.#refuseDeclared(name);
    if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
      throw new LlmgwError(
        'invalid_argument',
        'a patch is a JSON object of the keys to change, e.g. {"replicas": 2}',
      );
    }
    const current = await this.#o.store.models.get(name);
    if (current === undefined) throw await this.#notFound(name);
    // The source the patch leads to, to resolve before the row is locked (no network under a lock).
    const { source } = validated(mergePatch(current.spec, patch));
    return this.#write(name, (m) => validated(mergePatch(m.spec, patch)), { actor, expectVersion }, source);
  }

  /**
   * Changes a stored model's spec under its row lock, audited as `action` (`model.context`):
   * for commands that change one thing of a model and store it with the rest kept. The source
   * stays as it is, so nothing is resolved; the result is validated as any spec.
   */
  async change(
    name: string,
    next: (current: ModelSpec) => ModelSpec,
    o: { actor: string; action: string; expectVersion?: number | undefined },
  ): Promise<ModelView> {
    this.#refuseDeclared(name);
    const updated = await this.#o.store.models.update(
      name,
      (current) => {
        const spec = validated(next(current.spec));
        if (spec.source !== current.spec.source)
          throw new LlmgwError('internal', `a ${o.action} change may not change model "${name}"'s source`);
        return spec;
      },
      o,
    );
    return this.#changed(storedView(updated, await this.#o.store.origins.get(name)));
  }

  /**
   * Updates a stored model and, when its source is new (or was never resolved), its origin,
   * resolved first: in one transaction, or not at all.
   */
  async #write(
    name: string,
    change: (current: StoredModel) => ModelSpec,
    options: { actor: string; expectVersion: number | undefined },
    source: string,
  ): Promise<ModelView> {
    const had = await this.#o.store.origins.get(name);
    const resolved = needsResolving(had, source) ? await this.#o.origins.resolve(source) : undefined;
    const record = resolved === undefined ? had : this.#o.origins.record(name, resolved);
    const updated = await this.#o.store.transaction(async (tx) => {
      const m = await tx.models.update(
        name,
        (current) => {
          const next = change(current);
          if (next.source !== source) {
            throw new LlmgwError(
              'conflict',
              `model "${name}" changed its source while the new one was being resolved: read it again and redo your change`,
            );
          }
          // Held to the heads when its profiles or its shape change: a scale alone is not refused.
          if (resolved !== undefined || !isDeepStrictEqual(current.spec.profiles, next.profiles))
            refuseUnsplitHeads(next, record?.shape);
          return next;
        },
        options,
      );
      if (resolved !== undefined && record !== undefined) await tx.origins.put(record);
      return m;
    });
    return this.#changed(storedView(updated, record));
  }

  /**
   * Resolves a model's source again (a branch moved on: pins its new commit) and stores what
   * it found; a source that does not resolve now is refused and the record kept as it was.
   */
  async resolve(name: string, actor: string): Promise<ModelView> {
    const view = await this.get(name);
    const had = await this.#o.store.origins.get(name);
    const resolved: Resolution = await this.#o.origins.resolve(view.source);
    const record = this.#o.origins.record(name, resolved);
    await this.#o.store.transaction(async (tx) => {
      await tx.origins.put(record);
      await tx.audit.record({
        actor,
        action: 'model.resolve',
        target: `model/${name}`,
        detail: {
          source: view.source,
          ...(resolved.origin?.commit === undefined ? {} : { commit: resolved.origin.commit }),
          ...(had?.origin?.commit === undefined ? {} : { previous_commit: had.origin.commit }),
          ...(resolved.problem === null ? {} : { problem: resolved.problem }),
        },
      });
    });
    return this.#changed({ ...view, status: statusOf(record, view.source) });
  }

  async remove(name: string, actor: string): Promise<ModelView> {
    this.#refuseDeclared(name);
    const existing = await this.#o.store.models.get(name);
    if (existing === undefined) throw await this.#notFound(name);
    const record = await this.#o.store.origins.get(name);
    const removed = await this.#o.store.transaction(async (tx) => {
      const m = await tx.models.delete(name, actor);
      await tx.origins.delete(name);
      return m;
    });
    return this.#changed(storedView(removed, record));
  }

  #declared(name: string): ModelSpec | undefined {
    return this.#o.declared().find((m) => m.name === name);
  }

  #refuseDeclared(name: string): void {
    if (this.#declared(name) === undefined) return;
    throw new LlmgwError(
      'read_only',
      `model "${name}" is declared in the settings file ${this.#o.settingsPath()}, so it is read-only through the API: change it there with llmgw ctl config edit`,
    );
  }

  async #notFound(name: string): Promise<LlmgwError> {
    const names = (await this.list()).map((m) => m.name);
    const near = didYouMean(name, names);
    return new LlmgwError(
      'not_found',
      `model "${clientText(name)}" does not exist${near === undefined ? '' : `; did you mean "${near}"?`} (llmgw ctl models lists them)`,
    );
  }
}

function validated(input: unknown): ModelSpec {
  const r = validateModel(input, engines);
  if (r.ok) return r.model;
  throw invalidModel(r.issues);
}

export function invalidModel(issues: readonly Issue[]): LlmgwError {
  return new LlmgwError('invalid_argument', `invalid model, nothing was changed:\n${formatIssues(issues)}`, {
    issues,
  });
}

/** Resolved again when the source changed, or nothing was found of it the last time. */
function needsResolving(had: ModelOriginRecord | undefined, source: string): boolean {
  return had === undefined || had.source !== source || had.origin === null;
}

/** What was found of the model's source; nothing while the record is of another source. */
function statusOf(record: ModelOriginRecord | undefined, source: string): ModelStatus {
  if (record === undefined || record.source !== source) return {};
  return {
    ...(record.origin === null ? {} : { origin: record.origin }),
    ...(record.shape === null ? {} : { shape: record.shape }),
    ...(record.problem === null ? {} : { problem: record.problem }),
    resolved_at: record.resolved_at,
  };
}

function declaredView(spec: ModelSpec, record: ModelOriginRecord | undefined): ModelView {
  return { ...spec, metadata: { origin: 'config' }, status: statusOf(record, spec.source) };
}

function storedView(m: StoredModel, record: ModelOriginRecord | undefined): ModelView {
  return {
    ...m.spec,
    metadata: {
      origin: 'api',
      version: m.version,
      created_at: m.created_at,
      created_by: m.created_by,
      updated_at: m.updated_at,
      updated_by: m.updated_by,
    },
    status: statusOf(record, m.spec.source),
  };
}

/** RFC 7386: objects merge key by key, null removes a key, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const base =
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? (target as Record<string, unknown>)
      : {};
  const changes = patch as Record<string, unknown>;
  const kept = Object.entries(base).filter(([k]) => !(k in changes));
  const changed = Object.entries(changes)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => [k, mergePatch(base[k], v)] as const);
  return Object.fromEntries([...kept, ...changed]);
}
