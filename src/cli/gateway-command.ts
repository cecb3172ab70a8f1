import type { Command } from 'commander';

import { serverList } from '../client/failover-client.js';

import { stringOpt, type Runner } from './command.js';
import { logFormatOption, useLogFormat } from './log-format.js';
import { UsageError } from './usage-error.js';

export function registerGateway(program: Command, run: Runner): void {
  program
    .command('gateway')
    .description(
      'run an OpenAI-compatible gateway of its own (for scale-out): it follows the routes of a control plane and serves alone for a while when that one is away',
    )
    .option(
      '--server <urls>',
      'the control plane to follow, or several of one cluster: URL1,URL2 (default: LLMGW_SERVER)',
    )
    .option(
      '--key <key>',
      'a key of role gateway (llmgw ctl key create NAME --role gateway); default: LLMGW_KEY',
    )
    .option('--listen <address>', 'HOST:PORT to serve /v1 on', '127.0.0.1:8081')
    .option(
      '--ca <file>',
      "on https: the cluster CA (PEM, DATA_DIR/tls/ca.pem) the control plane's certificate must chain to; default: LLMGW_CA, else the login pinned by llmgw ctl login",
    )
    .option('-c, --config <path>', 'the settings file (gateway.*)')
    .option('--json', 'print errors as JSON (for JSON log lines: --log-format json)')
    .option(...logFormatOption)
    .action(
      run.action(async ({ opts }) => {
        useLogFormat(opts);
        const server = stringOpt(opts, 'server') ?? process.env['LLMGW_SERVER'];
        const key = stringOpt(opts, 'key') ?? process.env['LLMGW_KEY'];
        if (server === undefined || server === '')
          throw new UsageError('give the control plane: llmgw gateway --server http://HOST:8080 --key KEY');
        if (key === undefined || key === '')
          throw new UsageError(
            'give a key of role gateway: llmgw gateway --server URL --key KEY (llmgw ctl key create NAME --role gateway makes one)',
          );
        const servers = serverList(server);
        if (typeof servers === 'string') throw new UsageError(servers);
        const { runGateway } = await import('./run-gateway.js');
        await runGateway({
          servers,
          key,
          listen: stringOpt(opts, 'listen') ?? '127.0.0.1:8081',
          config: stringOpt(opts, 'config'),
          ca: stringOpt(opts, 'ca'),
        });
      }),
    );
}
