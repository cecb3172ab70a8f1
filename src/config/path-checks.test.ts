import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import SqliteDatabase from 'better-sqlite3';
import { describe, expect, it } from 'vitest';

import { dataDirMarker } from './data-dir.js';
import { loadSettings, SettingsError } from './load.js';
import { llmgwTable } from './sqlite-file.js';

/** A working directory three folders deep in a scratch folder, with the settings file in it. */
function place(): { root: string; cwd: string; file: string } {
  const root = mkdtempSync(join(tmpdir(), 'llmgw-paths-'));
  const cwd = join(root, 'a', 'b', 'c');
  mkdirSync(cwd, { recursive: true });
  return { root, cwd, file: join(cwd, 'llmgw.yaml') };
}

function load(text: string, o: { cwd: string; file: string; env?: Record<string, string> }) {
  writeFileSync(o.file, text);
  return loadSettings({ path: o.file, env: o.env ?? {}, cwd: o.cwd });
}

/** The refusal's lines after its head. */
function refused(text: string, o: { cwd: string; file: string; env?: Record<string, string> }): string[] {
  try {
    load(text, o);
  } catch (e) {
    if (e instanceof SettingsError) return e.message.split('\n').slice(1);
    throw e;
  }
  throw new Error('expected the settings to be refused');
}

function sqlite(path: string, tables: string[]): string {
  const db = new SqliteDatabase(path);
  db.pragma('journal_mode = WAL');
  for (const t of tables) db.exec(`CREATE TABLE "${t}" (id INTEGER)`);
  db.close();
  return path;
}

const dirFix =
  'llmgw would write its files there; give it a folder of its own, e.g. /var/lib/llmgw (llmgw creates it)';
const dbFix =
  'name the database llmgw made, or a new file (llmgw creates it), or leave database: out for DATA_DIR/llmgw.db';

describe('a data dir llmgw would not use', () => {
  const system: [string, string, string][] = [
    ['/etc', '/etc', 'is a folder of the system'],
    ['/usr/share/llmgw', '/usr/share/llmgw', 'is under /usr, a folder of the system'],
    ['/lib64/llmgw', '/lib64/llmgw', 'is under /lib64, a folder of the system'],
    ['/var/run/llmgw', '/var/run/llmgw', 'is under /var/run, a folder of the system'],
    ['/proc/self', '/proc/self', 'is under /proc, a folder of the system'],
  ];
  it.each(system)('refuses data_dir: %s, naming the line and the fix', (written, path, what) => {
    const p = place();
    expect(refused(`listen: 127.0.0.1:0\ndata_dir: ${written}\n`, p)).toEqual([
      `${p.file}:2: data_dir: ${path} ${what}: ${dirFix}`,
    ]);
  });

  it('says where a relative one resolved: ../../../../../../../../etc from the working directory is /etc', () => {
    const p = place();
    const up = '../'.repeat(p.cwd.split('/').length);
    expect(refused(`data_dir: ${up}etc\n`, p)).toEqual([
      `${p.file}:1: data_dir: /etc (${up}etc from the working directory ${p.cwd}) is a folder of the system: ${dirFix}`,
    ]);
  });

  it('follows a link to where it leads', () => {
    const p = place();
    symlinkSync('/etc', join(p.root, 'conf'));
    expect(refused(`data_dir: ${join(p.root, 'conf', 'llmgw')}\n`, p)).toEqual([
      `${p.file}:1: data_dir: ${join(p.root, 'conf', 'llmgw')} is (through a link) /etc/llmgw, under /etc, a folder of the system: ${dirFix}`,
    ]);
  });

  it.each(['/', '/home', '/var/lib', '/tmp'])('refuses %s, which holds others’ folders', (dir) => {
    const p = place();
    expect(refused(`data_dir: ${dir}\n`, p)).toEqual([
      `${p.file}:1: data_dir: ${dir} is a folder that holds others' folders: llmgw would write its files among theirs; give it a folder of its own in it, e.g. ${join(dir, 'llmgw')} (llmgw creates it)`,
    ]);
  });

  it('refuses a folder that holds files of others, and a file', () => {
    const p = place();
    const home = join(p.root, 'home');
    mkdirSync(join(home, 'Documents'), { recursive: true });
    for (const f of ['notes.txt', 'a.pdf', 'b.pdf', 'c.pdf', 'd.pdf', '.bashrc'])
      writeFileSync(join(home, f), 'x');
    expect(refused(`data_dir: ${home}\n`, p)).toEqual([
      `${p.file}:1: data_dir: ${home} already holds files that are not llmgw's (Documents, a.pdf, b.pdf, c.pdf, d.pdf and 1 more): llmgw keeps its files in a folder of its own; name a new or empty folder (llmgw creates it), or move those files out`,
    ]);
    expect(refused(`data_dir: ${join(home, 'notes.txt')}\n`, p)).toEqual([
      `${p.file}:1: data_dir: ${join(home, 'notes.txt')} is a file, not a folder: give llmgw a folder of its own, e.g. /var/lib/llmgw (llmgw creates it)`,
    ]);
  });

  it('says why a folder it cannot read was not taken', () => {
    const p = place();
    const loop = join(p.root, 'loop');
    symlinkSync(loop, loop);
    expect(refused(`data_dir: ${loop}\ndatabase: sqlite:${join(p.root, 'x.db')}\n`, p)).toEqual([
      `${p.file}:1: data_dir: cannot read ${loop} to check that it is llmgw's (ELOOP: too many symbolic links encountered, stat '${loop}'): name a folder this user may read and write`,
    ]);
    expect(refused(`database: sqlite:${loop}\n`, p)).toEqual([
      `${p.file}:1: database: cannot read sqlite:${loop} to check that it is llmgw's database (ELOOP: too many symbolic links encountered, stat '${loop}'): ${dbFix}`,
    ]);
  });

  it('names the environment variable that set it', () => {
    const p = place();
    expect(refused('listen: 127.0.0.1:0\n', { ...p, env: { LLMGW_DATA_DIR: '/etc/llmgw' } })).toEqual([
      `${p.file}: data_dir: /etc/llmgw is under /etc, a folder of the system: ${dirFix} (from the environment variable LLMGW_DATA_DIR)`,
    ]);
  });

  it('refuses the default one, relative to a working directory in a system folder', () => {
    const file = join(place().root, 'llmgw.yaml');
    expect(refused('listen: 127.0.0.1:0\n', { cwd: '/etc', file })).toEqual([
      `${file}:1: data_dir: /etc/.llmgw (the default, from the working directory /etc) is under /etc, a folder of the system: ${dirFix}`,
    ]);
  });
});

describe('a data dir llmgw uses', () => {
  it.each([
    ['one that does not exist yet', () => {}],
    ['an empty one', (d: string) => mkdirSync(d)],
    [
      'one with only hidden files and lost+found (a new account’s home, a disk of its own)',
      (d: string) => {
        mkdirSync(join(d, 'lost+found'), { recursive: true });
        for (const f of ['.bashrc', '.profile']) writeFileSync(join(d, f), 'x');
      },
    ],
    [
      'one llmgw made, whatever is in it',
      (d: string) => {
        mkdirSync(join(d, 'models'), { recursive: true });
        writeFileSync(join(d, dataDirMarker), '');
        writeFileSync(join(d, 'notes.txt'), 'x');
      },
    ],
    [
      'an older llmgw’s, known by its files',
      (d: string) => {
        mkdirSync(join(d, 'agent'), { recursive: true });
        writeFileSync(join(d, 'agent', 'node.json'), '{}');
        writeFileSync(join(d, 'notes.txt'), 'x');
      },
    ],
  ])('takes %s', (_name, make) => {
    const p = place();
    const dir = join(p.root, 'data');
    make(dir);
    expect(load(`data_dir: ${dir}\n`, p).settings.data_dir).toBe(dir);
  });

  it('takes a folder holding the files its settings name for llmgw, and nothing else', () => {
    const p = place();
    const dir = join(p.root, 'data');
    mkdirSync(join(dir, 'tls'), { recursive: true });
    writeFileSync(join(dir, 'cert.pem'), 'x');
    writeFileSync(join(dir, 'tls', 'key.pem'), 'x');
    const text = `data_dir: ${dir}\ntls: {cert: cert.pem, key: ${join(dir, 'tls', 'key.pem')}}\n`;
    expect(load(text, { ...p, cwd: dir }).settings.data_dir).toBe(dir);
    writeFileSync(join(dir, 'other.txt'), 'x');
    expect(refused(text, { ...p, cwd: dir })).toEqual([
      `${p.file}:1: data_dir: ${dir} already holds files that are not llmgw's (other.txt): llmgw keeps its files in a folder of its own; name a new or empty folder (llmgw creates it), or move those files out`,
    ]);
  });

  it('takes the folder the settings file itself is in', () => {
    const p = place();
    expect(load('data_dir: .\n', p).settings.data_dir).toBe(p.cwd);
  });
});

describe('a database llmgw would not use', () => {
  it.each([
    ['sqlite:/etc/passwd', '/etc/passwd', 'is under /etc, a folder of the system'],
    ['sqlite:/dev/zero', '/dev/zero', 'is under /dev, a folder of the system'],
    ['sqlite:/usr/lib/x.db', '/usr/lib/x.db', 'is under /usr, a folder of the system'],
  ])('refuses %s', (written, path, what) => {
    const p = place();
    expect(refused(`database: ${written}\n`, p)).toEqual([
      `${p.file}:1: database: sqlite:${path} ${what}: ${dbFix}`,
    ]);
  });

  it('refuses a file that is no SQLite database, saying where a relative path resolved', () => {
    const p = place();
    writeFileSync(join(p.cwd, 'notes.txt'), 'my notes\n');
    expect(refused('listen: 127.0.0.1:0\ndatabase: sqlite:notes.txt\n', p)).toEqual([
      `${p.file}:2: database: sqlite:${join(p.cwd, 'notes.txt')} (sqlite:notes.txt from the working directory ${p.cwd}) is a file that is not an SQLite database, which llmgw neither uses nor changes: ${dbFix}`,
    ]);
  });

  it('refuses another program’s SQLite database, and a folder', () => {
    const p = place();
    const other = sqlite(join(p.root, 'places.sqlite'), ['moz_places', 'moz_bookmarks']);
    expect(refused(`database: sqlite:${other}\n`, p)).toEqual([
      `${p.file}:1: database: sqlite:${other} is the SQLite database of another program (its tables: moz_places, moz_bookmarks), which llmgw neither uses nor changes: ${dbFix}`,
    ]);
    expect(refused(`database: sqlite:${p.root}\n`, p)).toEqual([
      `${p.file}:1: database: sqlite:${p.root} is not a file (a folder, a device or a pipe): ${dbFix}`,
    ]);
  });

  it('takes llmgw’s database, an empty file or database, and a file yet to be made', () => {
    const p = place();
    const files = {
      ours: sqlite(join(p.root, 'ours.db'), ['models', llmgwTable]),
      emptyDatabase: sqlite(join(p.root, 'empty.db'), []),
      emptyFile: join(p.root, 'zero.db'),
      absent: join(p.root, 'new', 'llmgw.db'),
    };
    writeFileSync(files.emptyFile, '');
    for (const f of Object.values(files))
      expect(load(`database: sqlite:${f}\n`, p).settings.database).toBe(`sqlite:${f}`);
  });

  it('reports the data dir and an explicit database both, and the default database not again', () => {
    const p = place();
    expect(
      refused('data_dir: /etc\ndatabase: sqlite:/etc/passwd\n', p).map((l) =>
        /:(\d+): (\w+):/.exec(l)?.slice(1),
      ),
    ).toEqual([
      ['1', 'data_dir'],
      ['2', 'database'],
    ]);
    expect(refused('data_dir: /etc\n', p)).toHaveLength(1);
  });
});
