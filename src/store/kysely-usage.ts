import type { Context } from './kysely-shared.js';
import type { UsageDelta, UsageFilter, UsageRepository } from './store.js';

export class Usage implements UsageRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  add(rows: readonly UsageDelta[]): Promise<void> {
    if (rows.length === 0) return Promise.resolve();
    return this.#c.tx(async (db) => {
      for (const r of rows) {
        await db
          .insertInto('usage')
          .values(r)
          .onConflict((oc) =>
            oc.columns(['key_name', 'model', 'hour']).doUpdateSet((eb) => ({
              requests: eb('usage.requests', '+', eb.ref('excluded.requests')),
              prompt_tokens: eb('usage.prompt_tokens', '+', eb.ref('excluded.prompt_tokens')),
              completion_tokens: eb('usage.completion_tokens', '+', eb.ref('excluded.completion_tokens')),
            })),
          )
          .execute();
      }
    });
  }

  async list(filter: UsageFilter = {}): Promise<UsageDelta[]> {
    let q = this.#c.db
      .selectFrom('usage')
      .selectAll()
      .orderBy('hour', 'desc')
      .orderBy('key_name')
      .orderBy('model')
      .limit(10_000);
    if (filter.key !== undefined) q = q.where('key_name', '=', filter.key);
    if (filter.model !== undefined) q = q.where('model', '=', filter.model);
    if (filter.since !== undefined) q = q.where('hour', '>=', hourOf(filter.since));
    const rows = await q.execute();
    return rows;
  }
}

/** The start of the hour a time falls in: `2026-12-02T13:00:00.000Z`. */
export function hourOf(iso: string): string {
  const d = new Date(iso);
  d.setUTCMinutes(0, 0, 0);
  return d.toISOString();
}
