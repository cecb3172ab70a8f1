import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * llmgw's files are its owner's alone: the database holds key hashes and engine keys, the
 * settings may hold a database password, the agent's files its credential and engine keys.
 * Created so, and put right on start when an older llmgw (or a copy) left them open to others.
 */

/** A file or directory that was open to others: made `now`, or left so when it could not be (`error`). */
export interface ModeFix {
  path: string;
  was: string;
  now: string;
  error?: string;
}

export type OnFixed = (fixed: ModeFix) => void;

/** The warning for a fix, as a sentence. */
export function describeFix(f: ModeFix): string {
  return f.error === undefined
    ? `${f.path} was open to other users (mode ${f.was}): made it ${f.now}`
    : `${f.path} is open to other users (mode ${f.was}) and could not be made ${f.now} (${f.error}): chmod ${f.now.slice(1)} it`;
}

const octal = (mode: number) => `0${(mode & 0o777).toString(8)}`;

/** Makes a path its owner's only (`mode` 0700 or 0600), when it exists and is open to group or others. */
export function restrict(path: string, mode: 0o700 | 0o600, onFixed: OnFixed): void {
  let current: number;
  try {
    current = statSync(path).mode;
  } catch {
    return;
  }
  if ((current & 0o077) === 0) return;
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

/**
 * Makes the data dir 0700 and its secret files 0600; with `create`, creates it 0700 (and any
 * parent it creates) first. A control plane on PostgreSQL keeps nothing there, so it creates none.
 */
export function secureDataDir(dataDir: string, o: { create: boolean; onFixed: OnFixed }): void {
  const { onFixed } = o;
  if (o.create) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  restrict(dataDir, 0o700, onFixed);
  for (const f of secretFiles) restrict(join(dataDir, f), 0o600, onFixed);
}

/**
 * Creates an SQLite database file empty and 0600 before SQLite opens it, so that it never
 * exists with the umask's mode; SQLite gives its -wal and -shm files the database's mode.
 * Existing ones (and their -wal and -shm) are made 0600.
 */
export function secureSqliteFile(path: string, onFixed: OnFixed): void {
  if (path === ':memory:') return;
  if (!existsSync(dirname(path))) mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  if (!existsSync(path)) closeSync(openSync(path, 'a', 0o600));
  for (const p of [path, `${path}-wal`, `${path}-shm`]) restrict(p, 0o600, onFixed);
}
