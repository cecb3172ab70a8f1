import type { Command } from 'commander';

import { stringOpt, type Runner } from './command.js';
import { UsageError } from './usage-error.js';

export function registerDoctor(program: Command, run: Runner): void {
  program
    .command('doctor')
    .description(
      'what is wrong on this node: GPU discovery, driver, cards and MIG, engines, and (given --server) the control plane and token',
    )
    .option('--server <url>', 'check that this control plane answers (default: LLMGW_SERVER)')
    .option('--token <token>', 'check that the control plane accepts this join token (default: LLMGW_TOKEN)')
    .option('-c, --config <path>', 'the settings file (data_dir, agent.engines...)')
    .option('--json', 'print one JSON document')
    .action(
      run.action(async ({ opts, o }) => {
        const server = stringOpt(opts, 'server') ?? nonEmpty(process.env['LLMGW_SERVER']);
        if (server === undefined && stringOpt(opts, 'token') !== undefined) {
          throw new UsageError(
            'a join token is checked by the control plane that made it: give it too, llmgw doctor --server URL --token TOKEN',
          );
        }
        const { runDoctor } = await import('./run-doctor.js');
        const code = await runDoctor({
          o,
          server,
          token: stringOpt(opts, 'token') ?? nonEmpty(process.env['LLMGW_TOKEN']),
          config: stringOpt(opts, 'config'),
        });
        if (code !== 0) run.exitCode = code;
      }),
    );
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}
