import type { Command } from 'commander';
import { Option } from 'commander';

import type { KeyLimitsBody } from '../../client/api-client.js';
import { roles } from '../../core/api-types.js';
import { stringOpt, type Runner } from '../command.js';
import { UsageError } from '../usage-error.js';
import { age, emit, table } from '../output.js';

import { connect } from './connection.js';

export function registerKeys(ctl: Command, run: Runner): void {
  ctl
    .command('keys')
    .description('list API keys (names, roles, prefixes, limits; never secrets)')
    .option('--all', 'include revoked keys')
    .action(
      run.action(async ({ opts, o, conn }) => {
        const keys = await connect(conn).listKeys(opts['all'] === true);
        emit(o, { items: keys }, ({ items }) =>
          table(
            ['NAME', 'ROLE', 'PREFIX', 'MODELS', 'RPM', 'TPM', 'CREATED', 'BY', 'LAST USED', 'REVOKED'],
            items.map((k) => [
              k.name,
              k.role,
              k.prefix,
              k.allowed_models === null ? 'all' : k.allowed_models.join(','),
              k.rpm === null ? '-' : String(k.rpm),
              k.tpm === null ? '-' : String(k.tpm),
              age(k.created_at),
              k.created_by,
              age(k.last_used_at),
              k.revoked_at === null ? '-' : age(k.revoked_at),
            ]),
          ),
        );
      }),
    );

  const key = ctl.command('key').description('create or revoke an API key');
  key
    .command('create')
    .argument('<name>', 'a name for the key: who or what uses it')
    .addOption(
      new Option(
        '--role <role>',
        'admin: everything; user: reads and the gateway; gateway: for llmgw gateway; metrics: reads /metrics only',
      )
        .choices(roles)
        .default('user'),
    )
    .option('--models <names>', 'models it may use through the gateway, comma-separated (default: all)')
    .option('--rpm <n>', 'requests per minute through the gateway (default: no limit)')
    .option('--tpm <n>', 'tokens per minute through the gateway (default: no limit)')
    .description('create a key; its secret is shown once')
    .action(
      run.action(async ({ opts, o, conn }, name: string) => {
        const role = roles.find((r) => r === opts['role']) ?? 'user';
        const created = await connect(conn).createKey(name, role, limitsOf(opts));
        emit(
          o,
          created,
          (c) =>
            `key "${c.key.name}" (${c.key.role}) created. Its secret, shown only this once:\n\n  ${c.secret}\n`,
        );
      }),
    );
  key
    .command('update')
    .argument('<name>', 'the key')
    .option('--models <names>', 'models it may use, comma-separated; "all" lifts the restriction')
    .option('--rpm <n>', 'requests per minute; "none" lifts the limit')
    .option('--tpm <n>', 'tokens per minute; "none" lifts the limit')
    .description('change what a key may use through the gateway')
    .action(
      run.action(async ({ opts, o, conn }, name: string) => {
        const limits = limitsOf(opts);
        if (Object.keys(limits).length === 0)
          throw new UsageError('say what to change: --models, --rpm or --tpm');
        const k = await connect(conn).updateKey(name, limits);
        emit(
          o,
          k,
          (v) =>
            `key "${v.name}" may now use ${v.allowed_models === null ? 'every model' : v.allowed_models.join(', ')}; rpm ${v.rpm ?? 'unlimited'}, tpm ${v.tpm ?? 'unlimited'}`,
        );
      }),
    );
  key
    .command('revoke')
    .argument('<name>', 'the key')
    .description('revoke a key: requests with it are refused from now on')
    .action(
      run.action(async ({ o, conn }, name: string) => {
        const k = await connect(conn).revokeKey(name);
        emit(o, k, (v) => `key "${v.name}" revoked`);
      }),
    );
}

function limitsOf(opts: Record<string, unknown>): KeyLimitsBody {
  const out: KeyLimitsBody = {};
  const models = stringOpt(opts, 'models');
  if (models !== undefined)
    out.models =
      models === 'all'
        ? null
        : models
            .split(',')
            .map((m) => m.trim())
            .filter((m) => m !== '');
  for (const k of ['rpm', 'tpm'] as const) {
    const v = stringOpt(opts, k);
    if (v === undefined) continue;
    if (v === 'none') {
      out[k] = null;
      continue;
    }
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1)
      throw new UsageError(`--${k} is a whole number of 1 or more (or none), not "${v}"`);
    out[k] = n;
  }
  return out;
}
