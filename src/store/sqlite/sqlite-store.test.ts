import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import SqliteDatabase from 'better-sqlite3';

import { storeContract } from '../store.contract.js';

import { openSqliteStore } from './sqlite-store.js';

storeContract('sqlite', { shared: false }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
  const path = join(dir, 'llmgw.db');
  return {
    open: () => openSqliteStore({ path }),
    reopen: () => openSqliteStore({ path }),
    addUnknownMigration: (name) => {
      const db = new SqliteDatabase(path);
      db.prepare('insert into llmgw_migration (name, timestamp) values (?, ?)').run(name, new Date().toISOString());
      db.close();
      return Promise.resolve();
    },
    cleanup: () => {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  };
});
