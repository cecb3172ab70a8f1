import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import SqliteDatabase from 'better-sqlite3';
import { describe, expect, it } from 'vitest';

import { isLlmgwDatabase, llmgwTable, sqliteFile } from './sqlite-file.js';

const scratch = () => mkdtempSync(join(tmpdir(), 'llmgw-sqlite-file-'));

/** A real SQLite database made by SQLite itself, closed. */
function database(
  dir: string,
  o: { pageSize?: number; tables: string[]; wal?: boolean; sqlPadding?: number },
): string {
  const path = join(dir, 'db.sqlite');
  const db = new SqliteDatabase(path);
  if (o.pageSize !== undefined) db.pragma(`page_size = ${o.pageSize}`);
  if (o.wal === true) db.pragma('journal_mode = WAL');
  // Long column lists make the schema span pages, and a long statement overflow its page.
  const padding = Array.from({ length: o.sqlPadding ?? 0 }, (_, i) => `, c${i} TEXT`).join('');
  for (const t of o.tables) db.exec(`CREATE TABLE "${t}" (id INTEGER PRIMARY KEY${padding})`);
  // Indexes and views are in the schema too, and are no tables.
  const first = o.tables[0];
  if (first !== undefined)
    db.exec(`CREATE INDEX an_index ON "${first}" (id); CREATE VIEW a_view AS SELECT 1`);
  db.close();
  return path;
}

describe('what a file named as the SQLite database is, read without SQLite', () => {
  it('tells a missing file, an empty one, a folder and a file that is no database apart', () => {
    const dir = scratch();
    writeFileSync(join(dir, 'empty'), '');
    writeFileSync(join(dir, 'passwd'), 'root:x:0:0:root:/root:/bin/bash\n'.repeat(20));
    writeFileSync(join(dir, 'short'), 'SQLite format 3\0');
    expect(sqliteFile(join(dir, 'none'))).toEqual({ kind: 'absent' });
    expect(sqliteFile(join(dir, 'none', 'deeper'))).toEqual({ kind: 'absent' });
    expect(sqliteFile(join(dir, 'passwd', 'deeper'))).toEqual({ kind: 'not-a-file' });
    expect(sqliteFile(join(dir, 'empty'))).toEqual({ kind: 'empty' });
    expect(sqliteFile(dir)).toEqual({ kind: 'not-a-file' });
    expect(sqliteFile(join(dir, 'passwd'))).toEqual({ kind: 'not-sqlite' });
    expect(sqliteFile(join(dir, 'short'))).toEqual({ kind: 'not-sqlite' });
  });

  it.each([
    [
      '512-byte pages, a schema over many pages with statements that overflow',
      { pageSize: 512, sqlPadding: 60 },
    ],
    ['4 KiB pages in WAL mode', { wal: true }],
    ['64 KiB pages', { pageSize: 65_536, sqlPadding: 5 }],
  ])('lists the tables of a database with %s', (_name, o) => {
    const tables = ['meta', 'models', ...Array.from({ length: 40 }, (_, i) => `t${i}`), llmgwTable];
    const path = database(scratch(), { ...o, tables });
    const found = sqliteFile(path);
    expect(found.kind === 'sqlite' ? [...(found.tables ?? [])].sort() : found).toEqual([...tables].sort());
    expect(isLlmgwDatabase(found)).toBe(true);
  });

  it("knows another program's database, and an empty one, from llmgw's", () => {
    const other = sqliteFile(database(scratch(), { tables: ['moz_places', 'moz_bookmarks'] }));
    expect(other).toEqual({ kind: 'sqlite', tables: ['moz_places', 'moz_bookmarks'] });
    expect(isLlmgwDatabase(other)).toBe(false);
    const dir = scratch();
    const empty = new SqliteDatabase(join(dir, 'e.db'));
    empty.pragma('journal_mode = WAL');
    empty.close();
    expect(sqliteFile(join(dir, 'e.db'))).toEqual({ kind: 'sqlite', tables: [] });
  });

  it('changes nothing: no -wal or -shm beside it, its bytes and times as they were', () => {
    const dir = scratch();
    const path = database(dir, { wal: true, tables: [llmgwTable] });
    const before = { names: readdirSync(dir), bytes: readFileSync(path), mtime: statSync(path).mtimeMs };
    expect(isLlmgwDatabase(sqliteFile(path))).toBe(true);
    expect({ names: readdirSync(dir), bytes: readFileSync(path), mtime: statSync(path).mtimeMs }).toEqual(
      before,
    );
  });

  it('reads a header of SQLite over a broken schema as SQLite whose tables are not known', () => {
    const dir = scratch();
    const path = database(dir, { tables: ['a'] });
    const bytes = readFileSync(path);
    bytes.fill(0xff, 100, 112);
    writeFileSync(path, bytes);
    expect(sqliteFile(path)).toEqual({ kind: 'sqlite', tables: undefined });
  });
});
