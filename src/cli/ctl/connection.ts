import { ApiClient } from '../../client/api-client.js';

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
  return new ApiClient({ server, key });
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

function sameServer(a: string, b: string): boolean {
  return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
}
