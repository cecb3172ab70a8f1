import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/**
 * This control plane's id, kept in its data dir: the same across restarts, so one that
 * comes back while its lease still runs takes it up again at once, and `ctl status` names
 * it the same. The host name makes it readable; the suffix tells two on one host apart.
 */
export function controlPlaneId(dataDir: string): string {
  const file = join(dataDir, 'control-plane-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9._-]{1,80}$/.test(id)) return id;
  } catch {
    // Made below.
  }
  const host =
    hostname()
      .replace(/[^A-Za-z0-9.-]/g, '-')
      .slice(0, 60) || 'control-plane';
  const id = `${host}-${randomBytes(3).toString('hex')}`;
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${id}\n`, { mode: 0o600 });
  return id;
}
