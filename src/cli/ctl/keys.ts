import type { Command } from 'commander';
import { Option } from 'commander';

import { type Runner } from '../command.js';
import { age, emit, table } from '../output.js';

import { connect } from './connection.js';

export function registerKeys(ctl: Command, run: Runner): void {
  ctl
    .command('keys')
    .description('list API keys (names, roles, prefixes; never secrets)')
    .option('--all', 'include revoked keys')
    .action(
      run.action(async ({ opts, o }) => {
        const keys = await connect(opts).listKeys(opts['all'] === true);
        emit(o, { items: keys }, ({ items }) =>
          table(
            ['NAME', 'ROLE', 'PREFIX', 'CREATED', 'BY', 'LAST USED', 'REVOKED'],
            items.map((k) => [k.name, k.role, k.prefix, age(k.created_at), k.created_by, age(k.last_used_at), k.revoked_at === null ? '-' : age(k.revoked_at)]),
          ),
        );
      }),
    );

  const key = ctl.command('key').description('create or revoke an API key');
  key
    .command('create')
    .argument('<name>', 'a name for the key: who or what uses it')
    .addOption(new Option('--role <role>', 'admin: everything; user: reads and the gateway').choices(['admin', 'user']).default('user'))
    .description('create a key; its secret is shown once')
    .action(
      run.action(async ({ opts, o }, name: string) => {
        const role = opts['role'] === 'admin' ? 'admin' : 'user';
        const created = await connect(opts).createKey(name, role);
        emit(o, created, (c) => `key "${c.key.name}" (${c.key.role}) created. Its secret, shown only this once:\n\n  ${c.secret}\n`);
      }),
    );
  key
    .command('revoke')
    .argument('<name>', 'the key')
    .description('revoke a key: requests with it are refused from now on')
    .action(
      run.action(async ({ opts, o }, name: string) => {
        const k = await connect(opts).revokeKey(name);
        emit(o, k, (v) => `key "${v.name}" revoked`);
      }),
    );
}
