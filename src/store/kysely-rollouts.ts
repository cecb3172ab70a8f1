import type { Selectable } from 'kysely';

import type { ModelSpec } from '../catalog/model-spec.js';

import { writeAudit, type Context } from './kysely-shared.js';
import type { Database } from './schema.js';
import type { Actor, RolloutRecord, RolloutRepository } from './store.js';

function toRecord(row: Selectable<Database['rollouts']>): RolloutRecord {
  return {
    model: row.model,
    change: row.change,
    mode: row.mode === 'in-place' ? 'in-place' : 'surge',
    by: row.by_actor,
    spec: JSON.parse(row.spec) as ModelSpec,
    replica: row.replica,
    replaces: row.replaces,
    profiles: row.profiles === null ? {} : (JSON.parse(row.profiles) as Record<string, number>),
    started_at: row.started_at,
    state: row.state === 'done' || row.state === 'failed' ? row.state : 'rolling',
    finished_at: row.finished_at,
    error: row.error,
  };
}

export class Rollouts implements RolloutRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async list(): Promise<RolloutRecord[]> {
    const rows = await this.#c.db.selectFrom('rollouts').selectAll().orderBy('model').execute();
    return rows.map(toRecord);
  }

  async get(model: string): Promise<RolloutRecord | undefined> {
    const row = await this.#c.db
      .selectFrom('rollouts')
      .selectAll()
      .where('model', '=', model)
      .executeTakeFirst();
    return row === undefined ? undefined : toRecord(row);
  }

  async start(record: Omit<RolloutRecord, 'state' | 'finished_at' | 'error'>): Promise<void> {
    const values = {
      change: record.change,
      mode: record.mode,
      by_actor: record.by,
      spec: JSON.stringify(record.spec),
      replica: record.replica,
      replaces: record.replaces,
      profiles: JSON.stringify(record.profiles),
      started_at: record.started_at,
      state: 'rolling',
      finished_at: null,
      error: null,
    };
    await this.#c.db
      .insertInto('rollouts')
      .values({ model: record.model, ...values })
      .onConflict((oc) => oc.column('model').doUpdateSet(values))
      .execute();
  }

  finish(
    model: string,
    startedAt: string,
    end: { state: 'done' } | { state: 'failed'; error: string },
    actor: Actor,
  ): Promise<boolean> {
    return this.#c.tx(async (db) => {
      const at = this.#c.now();
      const error = end.state === 'failed' ? end.error : null;
      const row = await db
        .updateTable('rollouts')
        .set({ state: end.state, finished_at: at, error })
        .where('model', '=', model)
        .where('started_at', '=', startedAt)
        .where('state', '=', 'rolling')
        .returningAll()
        .executeTakeFirst();
      if (row === undefined) return false;
      await writeAudit(db, {
        at,
        actor,
        action: `model.rollout.${end.state}`,
        target: `model/${model}`,
        detail: {
          change: row.change,
          mode: row.mode,
          by: row.by_actor,
          started_at: row.started_at,
          ...(error === null ? {} : { error }),
        },
      });
      return true;
    });
  }
}
