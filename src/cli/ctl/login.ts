import type { Command } from 'commander';

import { ApiClient } from '../../client/api-client.js';
import { type Runner } from '../command.js';
import { emit } from '../output.js';
import { UsageError } from '../usage-error.js';

import { defaultServer } from './connection.js';
import { saveLogin } from './login-file.js';

export function registerLogin(ctl: Command, run: Runner): void {
  ctl
    .command('login')
    .description('check a server and key, and save them for the next llmgw ctl commands')
    .action(
      run.action(async ({ o, conn }) => {
        const server = conn.server ?? process.env['LLMGW_SERVER'] ?? defaultServer;
        const key = conn.key ?? process.env['LLMGW_KEY'];
        if (key === undefined || key === '')
          throw new UsageError('give the key: llmgw ctl login --server URL --key KEY (or set LLMGW_KEY)');
        const me = await new ApiClient({ server, key }).whoami();
        const path = saveLogin({ server, key });
        emit(
          o,
          { server, name: me.name, role: me.role, saved_to: path },
          (d) => `logged in to ${d.server} as key "${d.name}" (${d.role}); saved to ${d.saved_to}`,
        );
      }),
    );
}
