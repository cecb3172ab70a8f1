import { randomBytes } from 'node:crypto';

import pg from 'pg';

/** The PostgreSQL server tests use: the local one, trust auth, unless told otherwise. */
export const postgresAdminUrl =
  process.env['LLMGW_TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TempDatabase {
  url: string;
  drop: () => Promise<void>;
}

/** A database of its own for one test file, dropped afterwards. */
export async function createTempDatabase(): Promise<TempDatabase> {
  const name = `llmgw_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: postgresAdminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(postgresAdminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: postgresAdminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
