import { pino, type Logger } from 'pino';

import { redact } from '../core/redact.js';

/** Structured JSON lines on standard output; secrets are scrubbed from every message. */
export function createLogger(component: string, env: NodeJS.ProcessEnv = process.env): Logger {
  return pino({
    level: env['LLMGW_LOG_LEVEL'] ?? 'info',
    base: { component },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: ['*.authorization', '*.key', '*.secret', '*.token', '*.password', 'headers.authorization'], censor: '[redacted]' },
    hooks: {
      logMethod(args, method) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redact(a) : a)) as Parameters<typeof method>);
      },
    },
  });
}
