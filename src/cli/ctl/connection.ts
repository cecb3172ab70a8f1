import { readFileSync } from 'node:fs';

import { ApiClient } from '../../client/api-client.js';
import { fetchTrusting } from '../../tls/trust.js';
import { UsageError } from '../usage-error.js';

import { readLogin } from './login-file.js';

export interface ConnectionFlags {
  server?: string | undefined;
  key?: string | undefined;
}

export const defaultServer = 'http://127.0.0.1:8080';

/** The server and key: flags, then LLMGW_SERVER and LLMGW_KEY, then the saved login, then the local default. */
export function connect(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): ApiClient {
  const saved = readLogin(env);
  const server = flags.server ?? nonEmpty(env['LLMGW_SERVER']) ?? saved?.server ?? defaultServer;
  // A saved key belongs to its saved server; it is not sent to another one.
  const savedKey = saved !== undefined && sameServer(saved.server, server) ? saved.key : undefined;
  const key = flags.key ?? nonEmpty(env['LLMGW_KEY']) ?? savedKey;
  const ca = trustedCa(
    server,
    env,
    saved !== undefined && sameServer(saved.server, server) ? saved.ca : undefined,
  );
  return new ApiClient({
    server,
    key,
    ...(ca === undefined ? {} : { fetch: fetchTrusting(ca, { repin: repinHint(server) }) }),
  });
}

/** The CA an https server must chain to: LLMGW_CA (a PEM file), else the one pinned at login; else the system's. */
export function trustedCa(
  server: string,
  env: NodeJS.ProcessEnv,
  pinned: string | undefined,
): string | undefined {
  if (!server.startsWith('https:')) return undefined;
  const file = nonEmpty(env['LLMGW_CA']);
  return file === undefined ? pinned : readCaFile(file, 'LLMGW_CA');
}

export function readCaFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new UsageError(
      `${what} ${path} cannot be read (${(e as Error).message}): give the path of the cluster CA's PEM (DATA_DIR/tls/ca.pem on a control plane)`,
    );
  }
}

export const repinHint = (server: string): string => `llmgw ctl login --server ${server} --pin-again`;

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

function sameServer(a: string, b: string): boolean {
  return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
}
