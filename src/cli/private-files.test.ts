import { chmodSync, existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import SqliteDatabase from 'better-sqlite3';
import { describe, expect, it } from 'vitest';

import { dataDirMarker } from '../config/data-dir.js';
import { llmgwTable } from '../config/sqlite-file.js';

import { describeFix, secureDataDir, secureSqliteFile, type ModeFix } from './private-files.js';

const modeOf = (p: string) => `0${(statSync(p).mode & 0o777).toString(8)}`;
const scratch = () => mkdtempSync(join(tmpdir(), 'llmgw-modes-'));

describe("llmgw's files are its owner's alone", () => {
  it('creates the data dir, and the parents it makes, 0700 whatever the umask', () => {
    const dir = join(scratch(), 'var', 'llmgw');
    const old = process.umask(0o022);
    try {
      secureDataDir(dir, { create: true, onFixed: () => expect.fail('nothing to fix') });
    } finally {
      process.umask(old);
    }
    expect(modeOf(dir)).toBe('0700');
    expect(modeOf(join(dir, '..'))).toBe('0700');
    // Marked as made by llmgw, the marker its owner's only too.
    expect(modeOf(join(dir, dataDirMarker))).toBe('0600');
  });

  it('does not create the data dir when asked not to', () => {
    const dir = join(scratch(), 'none');
    secureDataDir(dir, { create: false, onFixed: () => expect.fail('nothing to fix') });
    expect(() => statSync(dir)).toThrow();
  });

  it('makes a data dir it made 0700 again, and the secret files it writes there 0600, saying which', () => {
    const dir = join(scratch(), 'data');
    secureDataDir(dir, { create: true, onFixed: () => expect.fail('nothing to fix') });
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, 'agent'));
    writeFileSync(join(dir, 'agent', 'node.json'), '{}', { mode: 0o644 });
    writeFileSync(join(dir, 'agent', 'assignment.json'), '{}', { mode: 0o600 });
    // The settings file may be the operator's own, written by hand: reported, not changed.
    writeFileSync(join(dir, 'config.yaml'), '', { mode: 0o640 });
    const fixed: ModeFix[] = [];
    secureDataDir(dir, { create: true, onFixed: (f) => fixed.push(f) });
    expect(fixed).toEqual([
      { path: dir, was: '0755', now: '0700' },
      { path: join(dir, 'config.yaml'), was: '0640', now: '0600', notOurs: true },
      { path: join(dir, 'agent', 'node.json'), was: '0644', now: '0600' },
    ]);
    expect([modeOf(dir), modeOf(join(dir, 'config.yaml')), modeOf(join(dir, 'agent', 'node.json'))]).toEqual([
      '0700',
      '0640',
      '0600',
    ]);
    expect(describeFix(fixed[0]!)).toBe(`${dir} was open to other users (mode 0755): made it 0700`);
    expect(describeFix(fixed[1]!)).toBe(
      `${join(dir, 'config.yaml')} is open to other users (mode 0640); llmgw did not create it, so it leaves its mode alone: chmod 600 ${join(dir, 'config.yaml')}`,
    );
  });

  it('leaves the modes of a folder it did not make, and of its files, saying the chmod to run', () => {
    for (const dir of [scratch(), '/etc']) {
      const before = modeOf(dir);
      const fixed: ModeFix[] = [];
      secureDataDir(dir, { create: true, onFixed: (f) => fixed.push(f) });
      expect(modeOf(dir)).toBe(before);
      if (before !== '0700') {
        expect(fixed[0]).toEqual({ path: dir, was: before, now: '0700', notOurs: true });
        expect(describeFix(fixed[0]!)).toBe(
          `${dir} is open to other users (mode ${before}); llmgw did not create it, so it leaves its mode alone: chmod 700 ${dir}`,
        );
      }
      expect(existsSync(join(dir, dataDirMarker))).toBe(false);
    }
    const legacy = scratch();
    chmodSync(legacy, 0o755);
    mkdirSync(join(legacy, 'agent'));
    writeFileSync(join(legacy, 'agent', 'node.json'), '{}', { mode: 0o644 });
    const fixed: string[] = [];
    secureDataDir(legacy, { create: true, onFixed: (f) => fixed.push(describeFix(f)) });
    expect(fixed).toEqual([
      `${legacy} is open to other users (mode 0755); llmgw did not create it, so it leaves its mode alone: chmod 700 ${legacy}`,
      `${join(legacy, 'agent', 'node.json')} is open to other users (mode 0644); llmgw did not create it, so it leaves its mode alone: chmod 600 ${join(legacy, 'agent', 'node.json')}`,
    ]);
    expect([modeOf(legacy), modeOf(join(legacy, 'agent', 'node.json'))]).toEqual(['0755', '0644']);
  });

  it('says what to do when a mode cannot be changed', () => {
    expect(
      describeFix({
        path: '/srv/llmgw.db',
        was: '0644',
        now: '0600',
        error: 'EPERM: operation not permitted',
      }),
    ).toBe(
      '/srv/llmgw.db is open to other users (mode 0644) and could not be made 0600 (EPERM: operation not permitted): chmod 600 it',
    );
  });

  it('creates the SQLite database 0600 before SQLite opens it; SQLite gives its -wal and -shm the same mode', () => {
    const db = join(scratch(), 'store', 'llmgw.db');
    const old = process.umask(0o022);
    try {
      secureSqliteFile(db, () => expect.fail('nothing to fix'));
      const file = new SqliteDatabase(db);
      file.pragma('journal_mode = WAL');
      file.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
      expect([modeOf(db), modeOf(`${db}-wal`), modeOf(`${db}-shm`), modeOf(join(db, '..'))]).toEqual([
        '0600',
        '0600',
        '0600',
        '0700',
      ]);
      file.close();
    } finally {
      process.umask(old);
    }
  });

  it('makes an existing database of its own, and its -wal and -shm, 0600', () => {
    const db = join(scratch(), 'llmgw.db');
    const file = new SqliteDatabase(db);
    file.pragma('journal_mode = WAL');
    file.exec(`CREATE TABLE ${llmgwTable} (name TEXT)`);
    file.close();
    // As a copy or an older llmgw left them.
    for (const f of [`${db}-wal`, `${db}-shm`]) writeFileSync(f, '');
    for (const f of [db, `${db}-wal`, `${db}-shm`]) chmodSync(f, 0o644);
    const fixed: string[] = [];
    secureSqliteFile(db, (f) => fixed.push(describeFix(f)));
    expect(fixed).toEqual(
      [db, `${db}-wal`, `${db}-shm`].map((f) => `${f} was open to other users (mode 0644): made it 0600`),
    );
    for (const f of [db, `${db}-wal`, `${db}-shm`]) expect(modeOf(f)).toBe('0600');
  });

  it('leaves the mode of any other file named as the database, saying the chmod to run', () => {
    const dir = scratch();
    const other = new SqliteDatabase(join(dir, 'places.sqlite'));
    other.exec('CREATE TABLE moz_places (url TEXT)');
    other.close();
    writeFileSync(join(dir, 'passwd'), 'root:x:0:0::/root:/bin/sh\n');
    writeFileSync(join(dir, 'empty.db'), '');
    for (const name of ['places.sqlite', 'passwd', 'empty.db']) {
      const path = join(dir, name);
      chmodSync(path, 0o644);
      const fixed: string[] = [];
      secureSqliteFile(path, (f) => fixed.push(describeFix(f)));
      expect(fixed).toEqual([
        `${path} is open to other users (mode 0644); llmgw did not create it, so it leaves its mode alone: chmod 600 ${path}`,
      ]);
      expect(modeOf(path)).toBe('0644');
    }
  });
});
