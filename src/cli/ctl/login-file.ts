import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

import { z } from 'zod';

import { writeFileAtomic } from '../../config/write.js';
import { describeFix, restrict, type ModeFix, type OnFixed } from '../private-files.js';
import { UsageError } from '../usage-error.js';

/** Where llmgw ctl keeps the server and key `llmgw ctl login` saved, like a kubeconfig. */
export function loginFilePath(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env['LLMGW_CTL_CONFIG'];
  if (explicit !== undefined && explicit !== '') return explicit;
  const base = env['XDG_CONFIG_HOME'] ?? join(homedir(), '.config');
  return join(base, 'llmgw', 'ctl.json');
}

const loginSchema = z.object({
  server: z.string(),
  key: z.string().optional(),
  /** The CA (PEM) an https server's certificate must chain to: pinned at first login, or given with --ca. */
  ca: z.string().optional(),
  /** The server certificate's SHA-256 fingerprint when it was pinned, for people to compare. */
  fingerprint: z.string().optional(),
});
export type SavedLogin = z.output<typeof loginSchema>;

/**
 * The saved login; one left readable by others (copied, or saved by hand) is made 0600, saying
 * so. Read first: a file that is not a saved login (LLMGW_CTL_CONFIG naming another) is refused
 * with its mode as it was.
 */
export function readLogin(
  env: NodeJS.ProcessEnv = process.env,
  onFixed: OnFixed = noteOnStderr,
): SavedLogin | undefined {
  const path = loginFilePath(env);
  if (!existsSync(path)) return undefined;
  let login: SavedLogin;
  try {
    login = loginSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
  } catch {
    throw new UsageError(`${path} is not a saved login: run llmgw ctl login again, or delete it`);
  }
  restrict(path, 0o600, onFixed);
  return login;
}

function noteOnStderr(f: ModeFix): void {
  process.stderr.write(`note: ${describeFix(f)} (it holds an API key)\n`);
}

/** Saved readable by its owner only (0600, in a directory made 0700): it holds a key. */
export function saveLogin(login: SavedLogin, env: NodeJS.ProcessEnv = process.env): string {
  const path = loginFilePath(env);
  writeFileAtomic(path, `${JSON.stringify(login, null, 2)}\n`);
  return path;
}
