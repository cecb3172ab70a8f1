import { pino, type Logger } from 'pino';

import { redact } from '../core/redact.js';

/** Structured JSON lines on standard output; secrets are scrubbed from every message. */
export function createLogger(
  component: string,
  env: NodeJS.ProcessEnv = process.env,
  options: { async?: boolean } = {},
): Logger {
  // The gateway logs a line per request: written asynchronously, so a slow stdout never stalls a request.
  const destination = options.async === true ? pino.destination({ sync: false }) : undefined;
  const logger = pino(
    {
      level: env['LLMGW_LOG_LEVEL'] ?? 'info',
      base: { component },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
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
  if (destination !== undefined) process.once('exit', () => destination.flushSync());
  return logger;
}
