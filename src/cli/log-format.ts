import { UsageError } from './usage-error.js';

/** JSON lines for a log collector, or short human lines for a terminal. */
export type LogFormat = 'json' | 'pretty';

export const logFormats: readonly LogFormat[] = ['json', 'pretty'];

/** The environment variable that carries the format; a command sets it, so its worker processes follow. */
export const logFormatEnv = 'LLMGW_LOG_FORMAT';

function isLogFormat(value: string): value is LogFormat {
  return (logFormats as readonly string[]).includes(value);
}

/**
 * The format: --log-format, else LLMGW_LOG_FORMAT, else pretty on a terminal and JSON
 * otherwise (a pipe, a file, a container's log collector).
 */
export function chooseLogFormat(c: {
  flag?: string | undefined;
  env?: string | undefined;
  isTTY: boolean;
}): LogFormat {
  if (c.flag !== undefined) {
    if (isLogFormat(c.flag)) return c.flag;
    throw new UsageError(`--log-format ${c.flag} is not a log format: give ${logFormats.join(' or ')}`);
  }
  if (c.env !== undefined && c.env !== '') {
    if (isLogFormat(c.env)) return c.env;
    throw new UsageError(
      `${logFormatEnv}=${c.env} is not a log format: set it to ${logFormats.join(' or ')}, or unset it`,
    );
  }
  return c.isTTY ? 'pretty' : 'json';
}

/** The --log-format option of a command that runs a server (up, server, agent, gateway): `.option(...logFormatOption)`. */
export const logFormatOption = [
  '--log-format <format>',
  `log lines as ${logFormats.join(' or ')} (default: ${logFormatEnv}, else pretty on a terminal and json otherwise)`,
] as const;

/**
 * Settles the format for this process from its options and environment, and records it in
 * the environment: createLogger reads it there, and so do the gateway's worker processes,
 * which inherit the environment (and the terminal, or not) from this one.
 */
export function useLogFormat(
  opts: Record<string, unknown>,
  env: NodeJS.ProcessEnv = process.env,
  isTTY: boolean = stdoutIsTerminal(),
): LogFormat {
  const flag = opts['logFormat'];
  const format = chooseLogFormat({
    flag: typeof flag === 'string' ? flag : undefined,
    env: env[logFormatEnv],
    isTTY,
  });
  env[logFormatEnv] = format;
  return format;
}

/** Whether standard output is a terminal (a pipe's or a file's stream has no isTTY, whatever its type says). */
export function stdoutIsTerminal(): boolean {
  return (process.stdout as { isTTY?: boolean }).isTTY === true;
}
