import type { Command } from 'commander';

import { stringOpt, type Runner } from '../command.js';
import { emit, table } from '../output.js';

import { parseSince } from './audit.js';
import { connect } from './connection.js';

export function registerUsage(ctl: Command, run: Runner): void {
  ctl
    .command('usage')
    .description('requests and tokens through the gateway, per key, model and hour (newest first)')
    .option('--key <name>', "only this key's")
    .option('--model <name>', "only this model's (MODEL:ADAPTER for an adapter)")
    .option('--since <time>', 'since a time: an ISO time, or a duration back (30m, 24h, 7d)')
    .action(
      run.action(async ({ opts, o, conn }) => {
        const items = await connect(conn).usage({ key: stringOpt(opts, 'key'), model: stringOpt(opts, 'model'), since: parseSince(stringOpt(opts, 'since')) });
        emit(o, { items }, (d) => {
          if (d.items.length === 0) return 'No usage recorded for that.';
          const total = d.items.reduce((t, r) => ({ requests: t.requests + r.requests, prompt: t.prompt + r.prompt_tokens, completion: t.completion + r.completion_tokens }), { requests: 0, prompt: 0, completion: 0 });
          return [
            table(
              ['HOUR', 'KEY', 'MODEL', 'REQUESTS', 'PROMPT TOKENS', 'COMPLETION TOKENS'],
              d.items.map((r) => [r.hour.slice(0, 13).replace('T', ' ') + ':00Z', r.key_name, r.model, String(r.requests), String(r.prompt_tokens), String(r.completion_tokens)]),
            ),
            '',
            `total: ${total.requests} requests, ${total.prompt} prompt and ${total.completion} completion tokens`,
          ].join('\n');
        });
      }),
    );
}
