import type { Issue } from '../core/errors.js';
import { issuesFromZod } from '../core/zod-issues.js';

import type { CatalogEngine } from './catalog-engine.js';
import { modelSchemaFor, type ModelSpec } from './model-spec.js';
import { checkModel } from './rules.js';

export type ModelResult = { ok: true; model: ModelSpec } | { ok: false; issues: Issue[] };

/**
 * Validates one model as written (settings file, API body or `ctl model add`), all rules at
 * once, against the engines it may name (the registry's: src/engines/registry.ts).
 */
export function validateModel(input: unknown, engines: readonly CatalogEngine[]): ModelResult {
  const schema = modelSchemaFor(engines.map((e) => e.name));
  const parsed = schema.safeParse(input, { reportInput: true });
  if (!parsed.success) return { ok: false, issues: issuesFromZod(schema, parsed.error) };
  const { model, issues } = checkModel(parsed.data, engines);
  return issues.length > 0 ? { ok: false, issues } : { ok: true, model };
}

/** Validates a list of models (the settings file's `models:`), names unique across it. */
export function validateModels(
  input: readonly unknown[],
  engines: readonly CatalogEngine[],
): { models: ModelSpec[]; issues: Issue[] } {
  const models: ModelSpec[] = [];
  const issues: Issue[] = [];
  const names = new Map<string, number>();
  input.forEach((item, i) => {
    const r = validateModel(item, engines);
    if (!r.ok) {
      issues.push(...r.issues.map((x) => ({ ...x, path: [i, ...x.path] })));
      return;
    }
    const first = names.get(r.model.name);
    if (first !== undefined) {
      issues.push({
        path: [i, 'name'],
        message: `model "${r.model.name}" is declared twice (also item ${first}): give each model its own name`,
      });
      return;
    }
    names.set(r.model.name, i);
    models.push(r.model);
  });
  return { models, issues };
}
