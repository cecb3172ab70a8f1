import type { Context } from './kysely-shared.js';
import type { SharedValueRepository } from './store.js';

const prefix = 'shared/';

/** The shared values, in the `meta` table under a `shared/` prefix. */
export class SharedValues implements SharedValueRepository {
  readonly #c: Context;
  constructor(c: Context) {
    this.#c = c;
  }

  async get(key: string): Promise<string | undefined> {
    const row = await this.#c.db
      .selectFrom('meta')
      .select('value')
      .where('key', '=', prefix + key)
      .executeTakeFirst();
    return row?.value;
  }

  putIfAbsent(key: string, value: string): Promise<string> {
    return this.#c.tx(async (db) => {
      // Two control planes starting together: one insert wins, the other reads it.
      await db
        .insertInto('meta')
        .values({ key: prefix + key, value })
        .onConflict((oc) => oc.column('key').doNothing())
        .execute();
      const row = await db
        .selectFrom('meta')
        .select('value')
        .where('key', '=', prefix + key)
        .executeTakeFirstOrThrow();
      return row.value;
    });
  }

  replace(key: string, from: string, to: string): Promise<string> {
    return this.#c.tx(async (db) => {
      await db
        .updateTable('meta')
        .set({ value: to })
        .where('key', '=', prefix + key)
        .where('value', '=', from)
        .execute();
      const row = await db
        .selectFrom('meta')
        .select('value')
        .where('key', '=', prefix + key)
        .executeTakeFirstOrThrow();
      return row.value;
    });
  }
}
