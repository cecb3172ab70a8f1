import type { Selectable } from 'kysely';

import { originSchema } from '../models/origin.js';
import { ModelShapeSchema } from '../models/shape.js';

import type { Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import type { ModelOriginRecord, ModelOriginRepository } from './store.js';

function readJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A stored row, checked on the way in: a record this build cannot read (written by another
 * version) reads as unknown, with the way out, rather than as something it is not.
 */
function toRecord(row: Selectable<Database['model_origins']>): ModelOriginRecord {
  const unreadable: string[] = [];
  const origin = originSchema.nullable().safeParse(readJson(row.origin));
  if (!origin.success) unreadable.push('origin');
  const shape = ModelShapeSchema.nullable().safeParse(readJson(row.shape));
  if (!shape.success) unreadable.push('shape');
  const problem =
    unreadable.length === 0
      ? row.problem
      : `the stored ${unreadable.join(' and ')} of this model cannot be read by this llmgw: resolve it again (llmgw ctl model resolve ${row.model})`;
  return {
    model: row.model,
    source: row.source,
    origin: origin.success ? origin.data : null,
    shape: shape.success ? shape.data : null,
    problem,
    resolved_at: row.resolved_at,
  };
}

export class ModelOrigins implements ModelOriginRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async list(): Promise<ModelOriginRecord[]> {
    const rows = await this.#c.db.selectFrom('model_origins').selectAll().orderBy('model').execute();
    return rows.map(toRecord);
  }

  async get(model: string): Promise<ModelOriginRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('model_origins')
      .selectAll()
      .where('model', '=', model)
      .executeTakeFirst();
    return row === undefined ? undefined : toRecord(row);
  }

  async put(record: ModelOriginRecord): Promise<void> {
    const values = {
      source: record.source,
      origin: record.origin === null ? null : JSON.stringify(record.origin),
      shape: record.shape === null ? null : JSON.stringify(record.shape),
      problem: record.problem,
      resolved_at: record.resolved_at,
    };
    await this.#c.db
      .insertInto('model_origins')
      .values({ model: record.model, ...values })
      .onConflict((oc) => oc.column('model').doUpdateSet(values))
      .execute();
  }

  async delete(model: string): Promise<void> {
    await this.#c.db.deleteFrom('model_origins').where('model', '=', model).execute();
  }
}
