import pg from 'pg';

import { createTempDatabase, type TempDatabase } from '../../../test/support/postgres.js';
import { storeContract } from '../store.contract.js';

import { openPostgresStore } from './postgres-store.js';

storeContract('postgres', { shared: true }, () => {
  let temp: TempDatabase | undefined;
  const url = async () => {
    temp ??= await createTempDatabase();
    return temp.url;
  };
  return {
    open: async () => openPostgresStore({ url: await url() }),
    reopen: async () => openPostgresStore({ url: await url() }),
    addUnknownMigration: async (name) => {
      const c = new pg.Client({ connectionString: await url() });
      await c.connect();
      await c.query('insert into llmgw_migration (name, timestamp) values ($1, $2)', [
        name,
        new Date().toISOString(),
      ]);
      await c.end();
    },
    cleanup: async () => {
      await temp?.drop();
    },
  };
});
