import type { Command } from 'commander';

import { stringOpt, type Runner } from './command.js';
import { UsageError } from './usage-error.js';

export function registerAgent(program: Command, run: Runner): void {
  program
    .command('agent')
    .description(
      "run this machine's node agent: discover its GPUs, CPUs and memory, join a control plane, and run the engines placed here",
    )
    .option('--server <url>', 'the control plane to join (default: LLMGW_SERVER)')
    .option(
      '--token <token>',
      'a join token from llmgw ctl node token (default: LLMGW_TOKEN); not needed once the node has joined',
    )
    .option('--name <name>', "this node's name (default: the host name)")
    .option('-c, --config <path>', 'the settings file (data_dir, agent.engines...)')
    .option('--json', 'print errors as JSON (its log is JSON lines already)')
    .action(
      run.action(async ({ opts }) => {
        const server = stringOpt(opts, 'server') ?? process.env['LLMGW_SERVER'];
        if (server === undefined || server === '')
          throw new UsageError('give the control plane: llmgw agent --server http://HOST:8080 --token TOKEN');
        if (!/^https?:\/\//.test(server))
          throw new UsageError(`--server ${server} is not a URL: write http://HOST:8080`);
        const { runAgent } = await import('./run-agent.js');
        await runAgent({
          server,
          token: stringOpt(opts, 'token') ?? process.env['LLMGW_TOKEN'],
          name: stringOpt(opts, 'name'),
          config: stringOpt(opts, 'config'),
        });
      }),
    );
}
