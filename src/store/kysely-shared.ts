import type { Kysely } from 'kysely';

import { LlmgwError } from '../core/errors.js';

import type { Dialect } from './migrations.js';
import type { Database } from './schema.js';
import type { AuditView, Store } from './store.js';

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
export async function writeAudit(db: Kysely<Database>, entry: Omit<AuditView, 'id'>): Promise<void> {
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

/**
 * The columns an update sets, refused when it sets none: `update t set where …` is no SQL
 * (SQLite: near "where": syntax error), and a change of nothing is the caller's mistake.
 * Every update built from optional parts goes through here. Kysely leaves out undefined
 * values, so only defined ones count.
 */
export function someToSet<T extends object>(set: T, what: { target: string; fields: readonly string[] }): T {
  if (Object.values(set).some((v) => v !== undefined)) return set;
  throw new LlmgwError(
    'invalid_argument',
    `nothing to change of ${what.target}: an update sets at least one of ${what.fields.join(', ')}`,
  );
}
