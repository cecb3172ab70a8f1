import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

import SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  SqliteDialect,
  SqliteAdapter,
  SqliteDriver,
  type DatabaseConnection,
  type DialectAdapter,
  type Driver,
  type SqliteDialectConfig,
} from 'kysely';

import { LlmgwError, messageOf } from '../../core/errors.js';
import { KyselyStore } from '../kysely-store.js';
import { migrateToLatest } from '../migrate.js';
import type { Database } from '../schema.js';

export interface SqliteStoreOptions {
  /** A file path, or `:memory:`. */
  path: string;
  now?: () => Date;
}

/** The embedded store: one file, one control plane. */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<KyselyStore> {
  let file: SqliteDatabase.Database;
  try {
    if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
    file = new SqliteDatabase(options.path);
  } catch (e) {
    throw new LlmgwError('unavailable', `cannot open the SQLite database ${options.path}: ${messageOf(e)}`, {
      cause: e,
    });
  }
  // WAL lets readers run beside the writer; FULL sync makes each commit survive a power cut,
  // not only a crash of llmgw; the timeout waits out a second process (llmgw doctor, a backup).
  file.pragma('journal_mode = WAL');
  file.pragma('synchronous = FULL');
  file.pragma('foreign_keys = ON');
  file.pragma('busy_timeout = 5000');
  // What is deleted or overwritten (an engine key sealed in place, a revoked key's hash) is zeroed, not left in free space.
  file.pragma('secure_delete = ON');
  const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: file }) });
  try {
    await migrateToLatest(db as Kysely<unknown>, 'sqlite', `sqlite:${options.path}`);
  } catch (e) {
    await db.destroy();
    throw e;
  }
  return new KyselyStore({
    db,
    dialect: 'sqlite',
    onClose: () => db.destroy(),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
}

/**
 * Transactions that take the write lock when they begin. A deferred one that reads and
 * then writes fails with SQLITE_BUSY when another process wrote in between; an
 * immediate one waits its turn (busy_timeout) instead.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }
  // SQLite's schema changes are transactional: each migration lands whole with its record, so a
  // control plane killed while migrating never leaves a column added but the migration unrecorded.
  override createAdapter(): DialectAdapter {
    return new TransactionalDdlSqliteAdapter();
  }
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}
