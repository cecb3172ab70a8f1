/** The entry of a gateway worker process, forked by its primary (./pool.ts). */
import { createLogger } from '../logger.js';

import { runWorker } from './worker.js';

const logger = createLogger('gateway-worker', process.env, { async: true });
runWorker(logger).catch((e: unknown) => {
  logger.error({ err: e instanceof Error ? e.stack : String(e) }, 'gateway worker failed to start');
  process.exit(1);
});
