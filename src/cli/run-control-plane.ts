import type { Command } from 'commander';

import type { Runner } from './command.js';
import { logFormatOption, useLogFormat } from './log-format.js';
import type { ServeOptions } from './serve.js';

// The control plane's modules (store drivers, HTTP server, logger) load only when one
// is started, so llmgw ctl starts fast.
const serve = async (options: ServeOptions) => (await import('./serve.js')).serve(options);

export function registerServe(program: Command, run: Runner): void {
  program
    .command('server')
    .description(
      'run the control plane: catalog, API and gateway (several may share one PostgreSQL database)',
    )
    .option(
      '-c, --config <path>',
      'the settings file (default: LLMGW_CONFIG, else config.yaml in the data dir)',
    )
    .option('--listen <address>', 'HOST:PORT to serve on, over the setting')
    .option('--json', 'print the first-start admin key as JSON')
    .option(...logFormatOption)
    .action(run.action(async ({ opts, o }) => serve({ mode: 'server', opts: withLogFormat(opts), o })));

  program
    .command('up')
    .description(
      'run a whole single-machine cluster: the control plane on embedded SQLite (127.0.0.1:8080, data in ./.llmgw) with this machine as its node',
    )
    .option(
      '-c, --config <path>',
      'the settings file (default: LLMGW_CONFIG, else config.yaml in the data dir)',
    )
    .option('--listen <address>', 'HOST:PORT to serve on, over the setting')
    .option('--json', 'print the first-start admin key as JSON')
    .option(...logFormatOption)
    .action(run.action(async ({ opts, o }) => serve({ mode: 'up', opts: withLogFormat(opts), o })));
}

/** Settles the log format (a bad --log-format is refused) before the control plane's modules load. */
function withLogFormat(opts: Record<string, unknown>): Record<string, unknown> {
  useLogFormat(opts);
  return opts;
}
