import type { Logger } from 'pino';

import { clientText } from '../core/redact.js';

import type { Exchange } from './exchange.js';
import type { GatewayMetrics } from './gateway-metrics.js';

/** A request's status and time in the metrics, and its log line. */
export function logExchange(
  o: { logger: Logger; metrics: GatewayMetrics },
  x: Exchange,
  status: number,
): void {
  const ms = performance.now() - x.started;
  o.metrics.answered(x.model, x.principal?.name, status, ms / 1000);
  if (!o.logger.isLevelEnabled('info')) return;
  o.logger.info(
    {
      requestId: x.requestId,
      key: x.principal?.name,
      // What clients send is cut short and has secrets redacted: anyone may send a megabyte, or a key.
      model: x.model === undefined ? undefined : clientText(x.model, 100),
      replica: x.replica,
      status,
      ms: Math.round(ms * 10) / 10,
      ...(x.ttftMs === undefined ? {} : { ttftMs: Math.round(x.ttftMs * 10) / 10 }),
      ...(x.queuedMs > 0 ? { queuedMs: Math.round(x.queuedMs) } : {}),
      ...(x.retries > 0 ? { retries: x.retries } : {}),
      ...(x.stream === undefined ? {} : { stream: x.stream }),
      ...(x.usage === undefined
        ? {}
        : { promptTokens: x.usage.prompt, completionTokens: x.usage.completion }),
      ...(x.error === undefined ? {} : { error: clientText(x.error, 500) }),
    },
    'gateway request',
  );
}
