import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { LlmgwError, messageOf } from '../../core/errors.js';
import { redactUrl } from '../../core/redact.js';
import { KyselyStore } from '../kysely-store.js';
import { migrateToLatest } from '../migrate.js';
import type { Database } from '../schema.js';

import { PgWakeups } from './pg-wakeups.js';

export interface PostgresStoreOptions {
  url: string;
  /** Connections this control plane keeps open. */
  poolSize?: number;
  now?: () => Date;
}

/** 64-bit integers as numbers: ids and counters here stay far below 2^53. */
const int8 = 20;
const types = {
  getTypeParser: (oid: number, format?: 'text' | 'binary'): unknown =>
    oid === int8
      ? (v: string) => Number(v)
      : (pg.types.getTypeParser as (o: number, f?: string) => unknown)(oid, format),
};

/** The shared store: several control planes on one PostgreSQL database. */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<KyselyStore> {
  const where = redactUrl(options.url);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    types,
    connectionTimeoutMillis: 10_000,
  });
  // An idle connection that drops (a database restart) must not crash the control plane;
  // the pool replaces it and the next query reports any lasting problem.
  pool.on('error', () => undefined);
  try {
    const client = await pool.connect();
    client.release();
  } catch (e) {
    await pool.end();
    throw new LlmgwError('unavailable', `cannot connect to PostgreSQL at ${where}: ${messageOf(e)}`, {
      cause: e,
      hint: 'check that the server is running and the URL (user, host, port, database) is right',
    });
  }
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    await migrateToLatest(db as Kysely<unknown>, 'postgres', where);
  } catch (e) {
    await db.destroy();
    throw e;
  }
  return new KyselyStore({
    db,
    dialect: 'postgres',
    wakeups: new PgWakeups(options.url, types),
    onClose: () => db.destroy(),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
}
