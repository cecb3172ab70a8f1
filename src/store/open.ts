import { LlmgwError } from '../core/errors.js';

import { openPostgresStore } from './postgres/postgres-store.js';
import { openSqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/** Opens the store a `database:` setting names: `sqlite:PATH` or `postgres://...`. */
export function openStore(database: string): Promise<Store> {
  if (database.startsWith('sqlite:')) return openSqliteStore({ path: database.slice('sqlite:'.length) });
  if (/^postgres(ql)?:\/\//.test(database)) return openPostgresStore({ url: database });
  return Promise.reject(
    new LlmgwError('invalid_argument', 'database must be sqlite:PATH or a postgres:// URL'),
  );
}
