import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import type { Settings } from './load.js';

/**
 * Writes a file so that a crash at any moment leaves either the old file or the new
 * one, never a mix: a temporary file beside it, flushed, then renamed over it. The file is
 * its owner's only (0600), as is any directory made for it (0700).
 */
export function writeFileAtomic(path: string, text: string): void {
  const dir = dirname(path);
  // The files written so hold secrets (the settings, a saved login, a node's credential).
  mkdirSync(dir, { recursive: true, mode: 0o700 });
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

/** Keys that a running control plane cannot take without a restart. */
const restartKeys = ['listen', 'database', 'data_dir'] as const;
/** Sections read once at start (the gateway's limits and queue; where the mirror is). */
const restartSections = ['gateway', 'mirror', 'ha'] as const;

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
