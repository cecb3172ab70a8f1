import { Migrator, sql, type Kysely, type MigrationProvider } from 'kysely';

import { llmgwTable } from '../config/sqlite-file.js';
import { LlmgwError, messageOf } from '../core/errors.js';

import { migrations, type Dialect } from './migrations.js';

/** Also what tells llmgw's database from another (config/sqlite-file.ts). */
const migrationTable = llmgwTable;
const lockTable = 'llmgw_migration_lock';

/**
 * Brings the schema up to this build's version. A database that has migrations this
 * build does not know was written by a newer llmgw: it is refused, untouched, rather
 * than run against a schema the code does not understand.
 */
export async function migrateToLatest(
  db: Kysely<unknown>,
  dialect: Dialect,
  where: string,
): Promise<string[]> {
  const known = migrations(dialect);
  const applied = await appliedMigrations(db);
  const unknown = applied.filter((name) => !(name in known));
  if (unknown.length > 0) {
    const latest = Object.keys(known).sort().at(-1) ?? '(none)';
    throw new LlmgwError(
      'unavailable',
      `the database ${where} is newer than this llmgw: it has schema migration ${unknown.join(', ')}, and this build knows up to ${latest}. ` +
        'Upgrade llmgw to the version that wrote it, or set database: to another database.',
    );
  }
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(known) };
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: migrationTable,
    migrationLockTableName: lockTable,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'a migration';
    throw new LlmgwError(
      'unavailable',
      `could not migrate the database ${where} (${failed}): ${messageOf(error)}`,
      { cause: error },
    );
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

async function appliedMigrations(db: Kysely<unknown>): Promise<string[]> {
  const tables = await db.introspection.getTables();
  if (!tables.some((t) => t.name === migrationTable)) return [];
  const rows = await sql<{ name: string }>`select name from ${sql.table(migrationTable)}`.execute(db);
  return rows.rows.map((r) => r.name);
}
