import type { Command } from 'commander';

import { ApiError } from '../../client/api-client.js';
import type { UsageRow } from '../../core/api-types.js';
import { LlmgwError } from '../../core/errors.js';
import { stringOpt, type Runner } from '../command.js';
import { emit, table } from '../output.js';

import { parseSince } from './audit.js';
import { connect } from './connection.js';

export function registerUsage(ctl: Command, run: Runner): void {
  ctl
    .command('usage')
    .description('requests and tokens through the gateway, per key, model and hour (newest first)')
    .option('--key-name <name>', "only this key's (--key is the API key, as on every llmgw ctl command)")
    .option('--model <name>', "only this model's (MODEL:ADAPTER for an adapter)")
    .option('--since <time>', 'since a time: an ISO time, or a duration back (30m, 24h, 7d)')
    .action(
      run.action(async ({ opts, o, conn, cmd }) => {
        let items: UsageRow[];
        try {
          items = await connect(conn).usage({
            key: stringOpt(opts, 'keyName'),
            model: stringOpt(opts, 'model'),
            since: parseSince(stringOpt(opts, 'since')),
          });
        } catch (e) {
          // `ctl usage --key NAME` once filtered by key name: say what to write now. The value is
          // not repeated: it may be a secret.
          if (
            e instanceof ApiError &&
            e.code === 'unauthenticated' &&
            stringOpt(cmd.opts(), 'key') !== undefined
          ) {
            throw new LlmgwError(e.code, e.message, {
              hint: "--key is the API key; to show one key's usage, write llmgw ctl usage --key-name NAME",
            });
          }
          throw e;
        }
        emit(o, { items }, (d) => {
          if (d.items.length === 0) return 'No usage recorded for that.';
          const total = d.items.reduce(
            (t, r) => ({
              requests: t.requests + r.requests,
              prompt: t.prompt + r.prompt_tokens,
              completion: t.completion + r.completion_tokens,
            }),
            { requests: 0, prompt: 0, completion: 0 },
          );
          return [
            table(
              ['HOUR', 'KEY', 'MODEL', 'REQUESTS', 'PROMPT TOKENS', 'COMPLETION TOKENS'],
              d.items.map((r) => [
                r.hour.slice(0, 13).replace('T', ' ') + ':00Z',
                r.key_name,
                r.model,
                String(r.requests),
                String(r.prompt_tokens),
                String(r.completion_tokens),
              ]),
            ),
            '',
            `total: ${total.requests} requests, ${total.prompt} prompt and ${total.completion} completion tokens`,
          ].join('\n');
        });
      }),
    );
}
