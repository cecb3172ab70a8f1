import type { Command } from 'commander';

import { stringOpt, type Runner } from './command.js';
import { logFormatOption, useLogFormat } from './log-format.js';
import { UsageError } from './usage-error.js';

export function registerAgent(program: Command, run: Runner): void {
  program
    .command('agent')
    .description(
      "run this machine's node agent: discover its GPUs, CPUs and memory, join a control plane, and run the engines placed here",
    )
    .option(
      '--server <urls>',
      'the control plane to join, or several of one cluster separated by commas (default: LLMGW_SERVER)',
    )
    .option(
      '--token <token>',
      'a join token from llmgw ctl node token (default: LLMGW_TOKEN); not needed once the node has joined',
    )
    .option('--name <name>', "this node's name (default: the host name)")
    .option('-c, --config <path>', 'the settings file (data_dir, agent.engines...)')
    .option(
      '--keep-engines',
      'on SIGTERM or SIGINT, exit and leave the engines running for the next agent to take over (a restart, an upgrade)',
    )
    .option('--json', 'print errors as JSON (for JSON log lines: --log-format json)')
    .option(...logFormatOption)
    .action(
      run.action(async ({ opts }) => {
        useLogFormat(opts);
        const servers = parseServers(stringOpt(opts, 'server') ?? process.env['LLMGW_SERVER']);
        const { runAgent } = await import('./run-agent.js');
        await runAgent({
          server: servers,
          token: stringOpt(opts, 'token') ?? process.env['LLMGW_TOKEN'],
          name: stringOpt(opts, 'name'),
          config: stringOpt(opts, 'config'),
          keepEngines: opts['keepEngines'] === true,
        });
      }),
    );
}

/** `--server URL1,URL2`: each an http(s) URL, told apart by commas (spaces around them allowed). */
export function parseServers(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '')
    throw new UsageError('give the control plane: llmgw agent --server http://HOST:8080 --token TOKEN');
  const servers = value.split(',').map((s) => s.trim());
  for (const s of servers) {
    if (s === '')
      throw new UsageError(
        `--server ${value} has an empty address: separate control planes with single commas, as in http://cp1:8080,http://cp2:8080`,
      );
    let url: URL | undefined;
    try {
      url = new URL(s);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '')
      throw new UsageError(`--server ${s} is not a URL: write http://HOST:8080`);
  }
  return [...new Set(servers)];
}
