import { pino, type DestinationStream, type Logger } from 'pino';

import { redact } from '../core/redact.js';

import { chooseLogFormat, logFormatEnv, stdoutIsTerminal } from './log-format.js';
import { prettyLines } from './pretty-log.js';

export interface LoggerOptions {
  /** Write asynchronously (the gateway: a line per request, and a slow stdout must not stall one). */
  async?: boolean;
  /** Where lines go instead of standard output (tests). */
  destination?: DestinationStream;
}

/**
 * Log lines on standard output, secrets scrubbed from every one: JSON lines, or short human
 * lines on a terminal (LLMGW_LOG_FORMAT, which --log-format sets, decides; see log-format.ts).
 */
export function createLogger(
  component: string,
  env: NodeJS.ProcessEnv = process.env,
  options: LoggerOptions = {},
): Logger {
  const onTerminal = options.destination === undefined && stdoutIsTerminal();
  const format = chooseLogFormat({ env: env[logFormatEnv], isTTY: onTerminal });
  const sonic =
    options.destination === undefined ? pino.destination({ sync: options.async !== true }) : undefined;
  const out: DestinationStream = options.destination ?? (sonic as DestinationStream);
  // Pretty lines are made from the JSON pino wrote (its redaction done), synchronously, in
  // this process: no worker thread, so a line logged just before exit is not lost.
  let destination = out;
  if (format === 'pretty') {
    const pretty = prettyLines({ colorize: onTerminal && env['NO_COLOR'] === undefined });
    destination = { write: (line: string) => out.write(pretty(line)) };
  }
  const logger = pino(
    {
      level: env['LLMGW_LOG_LEVEL'] ?? 'info',
      base: { component },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: redactValues },
      redact: {
        paths: ['*.authorization', '*.key', '*.secret', '*.token', '*.password', 'headers.authorization'],
        censor: '[redacted]',
      },
      hooks: {
        logMethod(args, method) {
          method.apply(
            this,
            args.map((a) => (typeof a === 'string' ? redact(a) : a)) as Parameters<typeof method>,
          );
        },
      },
    },
    destination,
  );
  if (options.async === true && sonic !== undefined) process.once('exit', () => sonic.flushSync());
  return logger;
}

/** A key, token or URL password in a field's text (`err: e.message`, say) is scrubbed as in a message. */
function redactValues(obj: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(obj)) {
    if (typeof v !== 'string') continue;
    const r = redact(v);
    if (r !== v) (out ??= { ...obj })[k] = r;
  }
  return out ?? obj;
}
