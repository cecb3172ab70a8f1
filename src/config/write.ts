import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import type { Settings } from './load.js';

/**
 * Writes a file so that a crash at any moment leaves either the old file or the new
 * one, never a mix: a temporary file beside it, flushed, then renamed over it, and the
 * directory flushed. The file is its owner's only (0600), as is any directory made for it
 * (0700). Temporary copies that a killed writer left beside it are removed.
 */
export function writeFileAtomic(path: string, text: string): void {
  const dir = dirname(path);
  // The files written so hold secrets (the settings, a saved login, a node's credential).
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  removeTempCopies(path);
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeFileSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  // The rename itself is only durable once the directory is flushed.
  try {
    const dfd = openSync(dir, 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    // Some file systems refuse to fsync a directory; the rename has still happened.
  }
}

/**
 * Removes the temporary copies of `path` (`PATH.PID.HEX.tmp`) whose writer is gone: a
 * writer killed between creating one and renaming it leaves it behind, and it may hold a
 * secret since replaced. A live writer's copy is left alone (its pid is on this host: a
 * data dir is one machine's). This process writes synchronously, so none of its own is in
 * progress.
 */
export function removeTempCopies(path: string): void {
  const dir = dirname(path);
  const pattern = new RegExp(`^${escapeRegExp(basename(path))}\\.(\\d+)\\.[0-9a-f]{8}\\.tmp$`);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = pattern.exec(name)?.[1];
    if (pid === undefined) continue;
    if (Number(pid) !== process.pid && isAlive(Number(pid))) continue;
    rmSync(join(dir, name), { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: alive, another user's.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Keys that a running control plane cannot take without a restart. */
const restartKeys = ['listen', 'database', 'data_dir'] as const;
/** Sections read once at start (the gateway's limits and queue; where the mirror is; the cluster's client and informers). */
const restartSections = ['gateway', 'mirror', 'ha', 'kubernetes'] as const;

export interface SettingsChange {
  /** Keys whose new value is in effect now. */
  applied: string[];
  /** Keys whose new value takes effect at the next start. */
  restartRequired: string[];
}

export function diffSettings(before: Settings, after: Settings): SettingsChange {
  const restartRequired: string[] = restartKeys.filter((k) => before[k] !== after[k]);
  for (const k of restartSections) if (!isDeepStrictEqual(before[k], after[k])) restartRequired.push(k);
  const applied: string[] = [];
  // Placement and the agents' engines are read again at every placement and assignment; the hub
  // at every resolution.
  for (const k of ['models', 'agent', 'placement', 'hub'] as const)
    if (!isDeepStrictEqual(before[k], after[k])) applied.push(k);
  return { applied, restartRequired };
}
