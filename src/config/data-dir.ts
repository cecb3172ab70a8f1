import { closeSync, existsSync, openSync, readdirSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How llmgw knows a data dir is its own. One it creates gets a marker file as it is made: that
 * one llmgw made, and it may put its modes right. One from before the marker is known by the
 * files llmgw keeps there (its database, its control plane's id, its node's identity): llmgw
 * uses it, but changes no mode in it, since it cannot tell who made it.
 */

/** Written into a data dir as llmgw creates it. */
export const dataDirMarker = '.llmgw-data-dir';

/** Files only llmgw keeps in a data dir: one of them shows an unmarked folder is an older llmgw's data dir. */
const llmgwFiles = ['llmgw.db', 'control-plane-id', 'engine-key.secret', join('agent', 'node.json')];

/**
 * Names that say nothing about who uses a folder: hidden files (a new account's shell profile,
 * a desktop's folder settings) and a file system's lost+found.
 */
const ignored = (name: string) => name.startsWith('.') || name === 'lost+found';

export type DataDirState =
  | { kind: 'absent' }
  | { kind: 'not-a-folder' }
  /** Made by llmgw: it has the marker. */
  | { kind: 'made' }
  /** An older llmgw's: no marker, but llmgw's files. */
  | { kind: 'used' }
  /** Nothing in it but hidden files and, optionally, the settings file itself. */
  | { kind: 'empty' }
  /** Files of others: the first few names. */
  | { kind: 'others'; names: string[]; count: number }
  | { kind: 'unreadable'; reason: string };

/**
 * What a folder named as the data dir is to llmgw. The files the settings name (`named`,
 * absolute: the settings file itself, a TLS certificate and key, the database) are the
 * operator's, put there for llmgw: they, and folders holding them, do not count.
 */
export function dataDirState(dir: string, named: readonly string[] = []): DataDirState {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) return { kind: 'not-a-folder' };
    names = readdirSync(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { kind: 'absent' };
    if (code === 'ENOTDIR') return { kind: 'not-a-folder' };
    return { kind: 'unreadable', reason: (e as Error).message };
  }
  if (names.includes(dataDirMarker)) return { kind: 'made' };
  if (llmgwFiles.some((f) => existsSync(join(dir, f)))) return { kind: 'used' };
  const forLlmgw = (n: string) => named.some((p) => p === join(dir, n) || p.startsWith(`${join(dir, n)}/`));
  const others = names.filter((n) => !ignored(n) && !forLlmgw(n)).sort();
  if (others.length === 0) return { kind: 'empty' };
  return { kind: 'others', names: others.slice(0, 5), count: others.length };
}

/** Whether llmgw made this data dir (it has the marker). */
export function madeByLlmgw(dir: string): boolean {
  return existsSync(join(dir, dataDirMarker));
}

/** Marks a data dir llmgw has just created as its own. */
export function markDataDir(dir: string): void {
  const fd = openSync(join(dir, dataDirMarker), 'wx', 0o600);
  try {
    writeSync(
      fd,
      'llmgw made this folder as its data dir, and keeps the modes of its files here private (0700, 0600).\n',
    );
  } finally {
    closeSync(fd);
  }
}
