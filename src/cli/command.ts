import type { Command } from 'commander';

import { stdio, type Output } from './output.js';
import { printError } from './output.js';
import { UsageError } from './usage-error.js';

/**
 * Every command's action runs through here: its options (its own and its parents'),
 * an Output that honours --json, and one mapping of failures to exit statuses:
 * 0 done, 1 refused (by the server, or by the system), 2 a wrong command line.
 */
export class Runner {
  exitCode = 0;

  action(
    handler: (
      ctx: { opts: Record<string, unknown>; o: Output; cmd: Command; conn: ConnectionOptions },
      ...args: string[]
    ) => Promise<void> | void,
  ) {
    return async (...raw: unknown[]): Promise<void> => {
      const cmd = raw[raw.length - 1] as Command;
      const opts = cmd.optsWithGlobals();
      const conn = connectionOptions(cmd);
      const o = stdio(opts['json'] === true);
      try {
        await handler({ opts, o, cmd, conn }, ...(raw.slice(0, -2) as string[]));
      } catch (e) {
        printError(o, e);
        this.exitCode = e instanceof UsageError ? 2 : 1;
      }
    };
  }
}

export function stringOpt(opts: Record<string, unknown>, name: string): string | undefined {
  const v = opts[name];
  return typeof v === 'string' ? v : undefined;
}

/** The control plane and key, as `llmgw ctl --server --key` give them. */
export interface ConnectionOptions {
  server?: string | undefined;
  key?: string | undefined;
}

/** The connection flags, given after the command (`ctl models --key K`) or after `ctl` (`ctl --key K models`). */
function connectionOptions(cmd: Command): ConnectionOptions {
  let c: Command | null = cmd;
  while (c !== null && c.name() !== 'ctl') c = c.parent;
  const ctl = c?.opts() ?? {};
  const own = cmd.opts();
  return {
    server: stringOpt(own, 'server') ?? stringOpt(ctl, 'server'),
    key: stringOpt(own, 'key') ?? stringOpt(ctl, 'key'),
  };
}
