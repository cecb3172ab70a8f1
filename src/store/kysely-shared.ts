import type { Kysely } from 'kysely';

import type { Dialect } from './migrations.js';
import type { Database } from './schema.js';
import type { AuditEntry, Store } from './store.js';

/** What every repository of the Kysely store is given. */
export interface Context {
  db: Kysely<Database>;
  dialect: Dialect;
  now: () => string;
  tx: <T>(work: (db: Kysely<Database>) => Promise<T>) => Promise<T>;
  /** The whole store over a transaction's connection. */
  storeOn: (db: Kysely<Database>) => Store;
}

/** A duplicate key, as PostgreSQL and SQLite each report it. */
export function isUniqueViolation(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '23505' || (typeof code === 'string' && code.startsWith('SQLITE_CONSTRAINT'));
}

/** Audit entries are written in the transaction of the change they record. */
export async function writeAudit(db: Kysely<Database>, entry: Omit<AuditEntry, 'id'>): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      at: entry.at,
      actor: entry.actor,
      action: entry.action,
      target: entry.target,
      detail: JSON.stringify(entry.detail),
    })
    .execute();
}
