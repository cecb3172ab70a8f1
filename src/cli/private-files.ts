import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { madeByLlmgw, markDataDir } from '../config/data-dir.js';
import { isLlmgwDatabase, sqliteFile } from '../config/sqlite-file.js';

/**
 * llmgw's files are its owner's alone: the database holds key hashes and engine keys, the
 * settings may hold a database password, the agent's files its credential and engine keys.
 * They are created so (0700 folders, 0600 files, by the mode they are made with). llmgw
 * changes the mode only of what it made: its data dir (known by its marker, config/data-dir.ts)
 * and the files it writes there, and its database (known by its tables). Anything else open
 * to others is left as it is, with a warning that says the chmod to run.
 */

/** A file or directory that was open to others: made `now`; or left so, because it could not be (`error`) or is not llmgw's (`notOurs`). */
export interface ModeFix {
  path: string;
  was: string;
  now: string;
  error?: string;
  notOurs?: true;
}

export type OnFixed = (fixed: ModeFix) => void;

/** The warning for a fix, as a sentence. */
export function describeFix(f: ModeFix): string {
  if (f.notOurs === true)
    return `${f.path} is open to other users (mode ${f.was}); llmgw did not create it, so it leaves its mode alone: chmod ${f.now.slice(1)} ${f.path}`;
  return f.error === undefined
    ? `${f.path} was open to other users (mode ${f.was}): made it ${f.now}`
    : `${f.path} is open to other users (mode ${f.was}) and could not be made ${f.now} (${f.error}): chmod ${f.now.slice(1)} it`;
}

const octal = (mode: number) => `0${(mode & 0o777).toString(8)}`;

/**
 * Makes a path its owner's only (`mode` 0700 or 0600), when it exists and is open to group or
 * others; unless it is not llmgw's (`ours` false), which is only reported.
 */
export function restrict(path: string, mode: 0o700 | 0o600, onFixed: OnFixed, ours = true): void {
  let current: number;
  try {
    current = statSync(path).mode;
  } catch {
    return;
  }
  if ((current & 0o077) === 0) return;
  if (!ours) {
    onFixed({ path, was: octal(current), now: octal(mode), notOurs: true });
    return;
  }
  try {
    chmodSync(path, mode);
    onFixed({ path, was: octal(current), now: octal(mode) });
  } catch (e) {
    // Not its owner: say so, and go on as before.
    onFixed({
      path,
      was: octal(current),
      now: octal(mode),
      error: e instanceof Error ? e.message : String(e),
    });
  }
}

/** Files under the data dir that hold secrets (paths relative to it). */
export const secretFiles = [
  'config.yaml',
  join('agent', 'node.json'),
  join('agent', 'assignment.json'),
  // The engine forwarder's certificate and key.
  join('agent', 'engine-proxy.json'),
  join('tls', 'server-key.pem'),
] as const;

/** The settings file may be the operator's own, written by hand: llmgw writes the others itself. */
const writtenByLlmgw = (f: string) => f !== 'config.yaml';

/**
 * With `create`, creates the data dir 0700 (and any parent it creates), marked as llmgw's. In
 * a data dir llmgw made, makes the folder 0700 and the secret files it writes 0600; anything
 * else open to others is reported, not changed.
 */
export function secureDataDir(dataDir: string, o: { create: boolean; onFixed: OnFixed }): void {
  const { onFixed } = o;
  // The first folder it created, if it created any: then this one is new, and llmgw's.
  if (o.create && mkdirSync(dataDir, { recursive: true, mode: 0o700 }) !== undefined) markDataDir(dataDir);
  const ours = madeByLlmgw(dataDir);
  restrict(dataDir, 0o700, onFixed, ours);
  for (const f of secretFiles) restrict(join(dataDir, f), 0o600, onFixed, ours && writtenByLlmgw(f));
}

/**
 * Creates an SQLite database file empty and 0600 before SQLite opens it, so that it never
 * exists with the umask's mode; SQLite gives its -wal and -shm files the database's mode.
 * An existing one of llmgw's (and its -wal and -shm) is made 0600; another is reported.
 */
export function secureSqliteFile(path: string, onFixed: OnFixed): void {
  if (path === ':memory:') return;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    closeSync(openSync(path, 'wx', 0o600));
    return;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const ours = isLlmgwDatabase(sqliteFile(path));
  for (const p of [path, `${path}-wal`, `${path}-shm`]) restrict(p, 0o600, onFixed, ours);
}
