import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import SqliteDatabase from 'better-sqlite3';
import { Kysely, Migrator, sql, SqliteDialect } from 'kysely';
import { describe, expect, it } from 'vitest';

import { migrations } from '../migrations.js';
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
      db.prepare('insert into llmgw_migration (name, timestamp) values (?, ?)').run(
        name,
        new Date().toISOString(),
      );
      db.close();
      return Promise.resolve();
    },
    cleanup: () => {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  };
});

describe('migration 0005 on a database written before it', () => {
  it('keeps each replica its engine key, to be sealed by the control plane, and marks none as being replaced since', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    const path = join(dir, 'llmgw.db');
    try {
      const file = new SqliteDatabase(path);
      const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: file }) });
      const all = migrations('sqlite');
      const before = Object.fromEntries(Object.entries(all).filter(([name]) => name < '0005'));
      const migrator = new Migrator({
        db,
        provider: { getMigrations: () => Promise.resolve(before) },
        migrationTableName: 'llmgw_migration',
        migrationLockTableName: 'llmgw_migration_lock',
      });
      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      await sql`insert into replicas (id, model, profile, created_at, engine_key, spec, retiring, retire_reason) values ('tiny-1', 'tiny', 'cpu', '2026-01-01T00:00:00.000Z', 'llmgw_engine_old', '{"name":"tiny","source":"/m","replicas":1,"profiles":[]}', 1, 'restarted by admin')`.execute(
        db,
      );
      await db.destroy();

      const store = await openSqliteStore({ path });
      try {
        expect(await store.fleet.replicas()).toEqual([
          expect.objectContaining({
            id: 'tiny-1',
            sealed_key: 'llmgw_engine_old',
            retiring: true,
            retire_reason: 'restarted by admin',
            retiring_since: null,
          }),
        ]);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a stored origin this build cannot read', () => {
  it('reads as unknown, with the way to resolve it again, not as something it is not', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    const path = join(dir, 'llmgw.db');
    try {
      await (await openSqliteStore({ path })).close();
      const file = new SqliteDatabase(path);
      file
        .prepare(
          'insert into model_origins (model, source, origin, shape, problem, resolved_at) values (?, ?, ?, ?, ?, ?)',
        )
        .run('old', 'hf://org/repo', '{"kind":"git"}', 'not json', null, '2026-01-01T00:00:00.000Z');
      file.close();
      const store = await openSqliteStore({ path });
      try {
        expect(await store.origins.get('old')).toEqual({
          model: 'old',
          source: 'hf://org/repo',
          origin: null,
          shape: null,
          problem:
            'the stored origin and shape of this model cannot be read by this llmgw: resolve it again (llmgw ctl model resolve old)',
          resolved_at: '2026-01-01T00:00:00.000Z',
        });
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
