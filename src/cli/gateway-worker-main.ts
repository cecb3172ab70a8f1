/**
 * The entry of a gateway worker process, forked by its primary's pool
 * (src/gateway/workers/pool.ts, told this file's path by gateway-compose.ts): the worker's
 * composition root, which only makes its logger.
 */
import { runWorker } from '../gateway/workers/worker.js';

import { createLogger } from './logger.js';

const logger = createLogger('gateway-worker', process.env, { async: true });
runWorker(logger).catch((e: unknown) => {
  logger.error({ err: e instanceof Error ? e.stack : String(e) }, 'gateway worker failed to start');
  process.exit(1);
});
