import { chmodSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import SqliteDatabase from 'better-sqlite3';
import { describe, expect, it } from 'vitest';

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
  });

  it('does not create the data dir when asked not to', () => {
    const dir = join(scratch(), 'none');
    secureDataDir(dir, { create: false, onFixed: () => expect.fail('nothing to fix') });
    expect(() => statSync(dir)).toThrow();
  });

  it('makes an open data dir 0700 and its secret files 0600, saying which', () => {
    const dir = scratch();
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, 'agent'));
    writeFileSync(join(dir, 'agent', 'node.json'), '{}', { mode: 0o644 });
    writeFileSync(join(dir, 'config.yaml'), '', { mode: 0o640 });
    writeFileSync(join(dir, 'agent', 'assignment.json'), '{}', { mode: 0o600 });
    const fixed: ModeFix[] = [];
    secureDataDir(dir, { create: true, onFixed: (f) => fixed.push(f) });
    expect(fixed).toEqual([
      { path: dir, was: '0755', now: '0700' },
      { path: join(dir, 'config.yaml'), was: '0640', now: '0600' },
      { path: join(dir, 'agent', 'node.json'), was: '0644', now: '0600' },
    ]);
    expect([modeOf(dir), modeOf(join(dir, 'config.yaml')), modeOf(join(dir, 'agent', 'node.json'))]).toEqual([
      '0700',
      '0600',
      '0600',
    ]);
    expect(describeFix(fixed[0]!)).toBe(`${dir} was open to other users (mode 0755): made it 0700`);
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

  it('makes an existing database and its -wal and -shm 0600', () => {
    const dir = scratch();
    const db = join(dir, 'llmgw.db');
    for (const f of [db, `${db}-wal`, `${db}-shm`]) writeFileSync(f, '', { mode: 0o644 });
    const fixed: string[] = [];
    secureSqliteFile(db, (f) => fixed.push(f.path));
    expect(fixed).toEqual([db, `${db}-wal`, `${db}-shm`]);
    for (const f of [db, `${db}-wal`, `${db}-shm`]) expect(modeOf(f)).toBe('0600');
  });
});
