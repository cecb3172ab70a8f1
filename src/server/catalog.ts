import type { ModelSpec } from '../catalog/model-spec.js';
import { validateModel } from '../catalog/validate.js';
import { didYouMean } from '../core/did-you-mean.js';
import { formatIssues, LlmgwError, type Issue } from '../core/errors.js';
import { clientText } from '../core/redact.js';
import type { ModelView } from '../protocol/model-views.js';
import type { Store, StoredModel } from '../store/store.js';

export interface CatalogOptions {
  store: Store;
  /** The models the settings file declares, as they are now. */
  declared: () => readonly ModelSpec[];
  /** The settings file, named in refusals. */
  settingsPath: () => string;
}

type ChangeListener = () => void;

/**
 * The catalog as users see it: models declared in the settings file (read-only here)
 * and models added through the API (in the store), one namespace.
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
    const stored = await this.#o.store.models.list();
    const views = [...this.#o.declared().map(declaredView), ...stored.map(storedView)];
    return views.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Every model's spec, declared and stored. */
  async specs(): Promise<ModelSpec[]> {
    return (await this.list()).map(({ metadata: _metadata, ...spec }) => spec);
  }

  async get(name: string): Promise<ModelView> {
    const declared = this.#declared(name);
    if (declared !== undefined) return declaredView(declared);
    const stored = await this.#o.store.models.get(name);
    if (stored !== undefined) return storedView(stored);
    throw await this.#notFound(name);
  }

  async add(input: unknown, actor: string): Promise<ModelView> {
    const spec = validated(input);
    if (this.#declared(spec.name) !== undefined) {
      throw new LlmgwError(
        'conflict',
        `model "${spec.name}" is already declared in the settings file ${this.#o.settingsPath()}: pick another name, or change it there with llmgw ctl config edit`,
      );
    }
    return this.#changed(storedView(await this.#o.store.models.create(spec, actor)));
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
    return this.#changed(
      storedView(await this.#o.store.models.update(name, () => spec, { actor, expectVersion })),
    );
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
    const updated = await this.#o.store.models.update(
      name,
      (current) => {
        const merged = mergePatch(current.spec, patch);
        return validated(merged);
      },
      { actor, expectVersion },
    );
    return this.#changed(storedView(updated));
  }

  async remove(name: string, actor: string): Promise<ModelView> {
    this.#refuseDeclared(name);
    const existing = await this.#o.store.models.get(name);
    if (existing === undefined) throw await this.#notFound(name);
    return this.#changed(storedView(await this.#o.store.models.delete(name, actor)));
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
  const r = validateModel(input);
  if (r.ok) return r.model;
  throw invalidModel(r.issues);
}

export function invalidModel(issues: readonly Issue[]): LlmgwError {
  return new LlmgwError('invalid_argument', `invalid model, nothing was changed:\n${formatIssues(issues)}`, {
    issues,
  });
}

function declaredView(spec: ModelSpec): ModelView {
  return { ...spec, metadata: { origin: 'config' } };
}

function storedView(m: StoredModel): ModelView {
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
