import { isAbsolute, join } from 'node:path';

import type { Issue } from '../core/errors.js';

import { dataDirState } from './data-dir.js';
import { isLlmgwDatabase, sqliteFile } from './sqlite-file.js';
import { isSharedFolder, realPath, systemTreeOf } from './system-folders.js';

/**
 * Where llmgw would keep its data, checked before anything is written or started: llmgw
 * creates its data dir and database, or uses ones it made; it takes no folder of the system,
 * no folder that holds other files, and no file that is not its database. Everything here
 * only reads (stat, readdir, a file's first pages), so a refusal has changed nothing.
 */

export interface PathSetting {
  /** As the file or the environment wrote it; undefined when it was left to the default. */
  written: string | undefined;
  /** Absolute. */
  path: string;
}

export interface PathChecks {
  dataDir: PathSetting;
  /** The SQLite file; undefined for PostgreSQL and `:memory:`. */
  database: PathSetting | undefined;
  /** What relative paths resolved against. */
  cwd: string;
  /** Files the settings name (the settings file itself, TLS files), which may be in the data dir. */
  named: readonly string[];
}

const example = '/var/lib/llmgw';

/** What is wrong with the data dir and the SQLite database, as issues of `data_dir` and `database`. */
export function pathIssues(c: PathChecks): Issue[] {
  const issues: Issue[] = [];
  const dir = dataDirProblem(c);
  if (dir !== undefined) issues.push({ path: ['data_dir'], message: dir });
  // The default database is in the data dir: refused with it, it is not checked again.
  const skip = dir !== undefined && c.database?.written === undefined;
  const db = c.database === undefined || skip ? undefined : databaseProblem(c.database, c.cwd);
  if (db !== undefined) issues.push({ path: ['database'], message: db });
  return issues;
}

function dataDirProblem(c: PathChecks): string | undefined {
  const { path } = c.dataDir;
  const shown = where(c.dataDir, c.cwd, '', `the default, from the working directory ${c.cwd}`);
  const system = systemFolder(path);
  if (system !== undefined) {
    return `${shown} ${system}: llmgw would write its files there; give it a folder of its own, e.g. ${example} (llmgw creates it)`;
  }
  const real = realPath(path);
  if (isSharedFolder(path) || isSharedFolder(real)) {
    return `${shown} is ${real === path ? '' : `(through a link) ${real}, `}a folder that holds others' folders: llmgw would write its files among theirs; give it a folder of its own in it, e.g. ${join(real, 'llmgw')} (llmgw creates it)`;
  }
  const state = dataDirState(path, c.named);
  switch (state.kind) {
    case 'not-a-folder':
      return `${shown} is a file, not a folder: give llmgw a folder of its own, e.g. ${example} (llmgw creates it)`;
    case 'others': {
      const more = state.count > state.names.length ? ` and ${state.count - state.names.length} more` : '';
      return `${shown} already holds files that are not llmgw's (${state.names.join(', ')}${more}): llmgw keeps its files in a folder of its own; name a new or empty folder (llmgw creates it), or move those files out`;
    }
    case 'unreadable':
      return `cannot read ${shown} to check that it is llmgw's (${state.reason}): name a folder this user may read and write`;
    default:
      return undefined;
  }
}

function databaseProblem(db: PathSetting, cwd: string): string | undefined {
  const shown = where(db, cwd, 'sqlite:', 'the default, in the data dir');
  const fix =
    'name the database llmgw made, or a new file (llmgw creates it), or leave database: out for DATA_DIR/llmgw.db';
  const system = systemFolder(db.path);
  if (system !== undefined) return `${shown} ${system}: ${fix}`;
  const file = sqliteFile(db.path);
  switch (file.kind) {
    case 'not-a-file':
      return `${shown} is not a file (a folder, a device or a pipe): ${fix}`;
    case 'not-sqlite':
      return `${shown} is a file that is not an SQLite database, which llmgw neither uses nor changes: ${fix}`;
    case 'sqlite':
      // No tables: an empty database llmgw may fill. Tables, none of them llmgw's: another program's.
      if (file.tables === undefined || file.tables.length === 0 || isLlmgwDatabase(file)) return undefined;
      return `${shown} is the SQLite database of another program (its tables: ${listed(file.tables)}), which llmgw neither uses nor changes: ${fix}`;
    case 'unreadable':
      return `cannot read ${shown} to check that it is llmgw's database (${file.reason}): ${fix}`;
    default:
      return undefined;
  }
}

/** `is a folder of the system`, `is under /etc, a folder of the system`, or through a link; undefined when it is none. */
function systemFolder(path: string): string | undefined {
  const say = (p: string, tree: string) =>
    p === tree ? 'a folder of the system' : `under ${tree}, a folder of the system`;
  const tree = systemTreeOf(path);
  if (tree !== undefined) return `is ${say(path, tree)}`;
  const real = realPath(path);
  const behind = systemTreeOf(real);
  return behind === undefined ? undefined : `is (through a link) ${real}, ${say(real, behind)}`;
}

/** The path, and how a relative or default one resolved: a refusal says which file or folder it means. */
function where(s: PathSetting, cwd: string, prefix: string, byDefault: string): string {
  if (s.written === undefined) return `${prefix}${s.path} (${byDefault})`;
  const written = s.written.startsWith(prefix) ? s.written.slice(prefix.length) : s.written;
  if (isAbsolute(written)) return `${prefix}${s.path}`;
  return `${prefix}${s.path} (${prefix}${written} from the working directory ${cwd})`;
}

function listed(names: readonly string[]): string {
  return names.length > 5 ? `${names.slice(0, 5).join(', ')} and ${names.length - 5} more` : names.join(', ');
}
