import type { Logger } from 'pino';

/** Resolves on the first SIGINT or SIGTERM; a second one exits at once. */
export function untilSignalled(logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'stopping: finishing what is in flight');
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      const force = () => process.exit(1);
      process.once('SIGINT', force);
      process.once('SIGTERM', force);
      resolve();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
