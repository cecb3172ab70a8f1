import type { Selectable } from 'kysely';

import { writeAudit, type Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import type { Actor, ModelScaleRecord, ScaleDecision, ScaleRepository } from './store.js';

function toRecord(row: Selectable<Database['model_scale']>): ModelScaleRecord {
  return {
    model: row.model,
    replicas: row.replicas,
    decision: row.decision === null ? null : (JSON.parse(row.decision) as ScaleDecision),
    last_request_at: row.last_request_at,
    cold_start:
      row.cold_start_ms === null || row.cold_start_at === null
        ? null
        : { ms: row.cold_start_ms, at: row.cold_start_at },
    updated_at: row.updated_at,
  };
}

export class Scale implements ScaleRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async list(): Promise<ModelScaleRecord[]> {
    const rows = await this.#c.db.selectFrom('model_scale').selectAll().orderBy('model').execute();
    return rows.map(toRecord);
  }

  async get(model: string): Promise<ModelScaleRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('model_scale')
      .selectAll()
      .where('model', '=', model)
      .executeTakeFirst();
    return row === undefined ? undefined : toRecord(row);
  }

  put(record: Omit<ModelScaleRecord, 'updated_at'>, audit?: { actor: Actor }): Promise<void> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const values = {
        replicas: record.replicas,
        decision: record.decision === null ? null : JSON.stringify(record.decision),
        decided_at: record.decision?.at ?? null,
        last_request_at: record.last_request_at,
        // Whole milliseconds: the column is an integer on both databases.
        cold_start_ms: record.cold_start === null ? null : Math.round(record.cold_start.ms),
        cold_start_at: record.cold_start?.at ?? null,
        updated_at: at,
      };
      await db
        .insertInto('model_scale')
        .values({ model: record.model, ...values })
        .onConflict((oc) => oc.column('model').doUpdateSet(values))
        .execute();
      const d = record.decision;
      if (audit === undefined || d === null) return;
      await writeAudit(db, {
        at,
        actor: audit.actor,
        action: 'model.scale',
        target: `model/${record.model}`,
        detail: { from: d.from, to: d.to, direction: d.direction, reason: d.reason, figures: d.figures },
      });
    });
  }

  async remove(model: string): Promise<void> {
    await this.#c.db.deleteFrom('model_scale').where('model', '=', model).execute();
  }
}
