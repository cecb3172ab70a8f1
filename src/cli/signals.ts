import type { Logger } from 'pino';

let parentAtStart: number | undefined;

/** Notes which process started this one; called first thing, before the parent can go away. */
export function noteParent(): void {
  parentAtStart ??= process.ppid;
}

/**
 * Whether npm started llmgw (`npx llmgw up`, `npm exec`, `npm start`): npm runs a bin through
 * `sh -c`, passes SIGINT and SIGTERM to that shell only, and exits once it has, so when the
 * shell does not pass them on (dash does not), llmgw would be left running without a parent.
 */
export function startedByNpm(env: NodeJS.ProcessEnv): boolean {
  return env['npm_lifecycle_event'] !== undefined || env['npm_execpath'] !== undefined;
}

export interface ParentWatch {
  /** The parent's pid when this process started. */
  startedBy: number;
  /** The parent's pid now (process.ppid, which follows re-parenting). */
  ppid: () => number;
  intervalMs: number;
}

/**
 * Resolves once the parent has gone: this process was re-parented (to init, or to a
 * subreaper). A poll, since Linux tells a child of its parent's death only through prctl.
 */
export function whenParentGone(w: ParentWatch): { gone: Promise<void>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const gone = new Promise<void>((resolve) => {
    const check = () => {
      if (w.ppid() === w.startedBy) return false;
      clearInterval(timer);
      resolve();
      return true;
    };
    if (check()) return;
    timer = setInterval(check, w.intervalMs);
    // The watch alone keeps nothing running.
    timer.unref();
  });
  return { gone, cancel: () => clearInterval(timer) };
}

/**
 * Resolves on the first SIGINT or SIGTERM, or (started by npm) once the process that started
 * llmgw has gone; then a second SIGINT or SIGTERM exits at once.
 */
export function untilSignalled(logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve) => {
    const watch = startedByNpm(env)
      ? whenParentGone({
          startedBy: parentAtStart ?? process.ppid,
          ppid: () => process.ppid,
          intervalMs: 500,
        })
      : undefined;
    let stopping = false;
    const stop = (why: { signal: NodeJS.Signals } | { parent: 'gone' }) => {
      if (stopping) return;
      stopping = true;
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      watch?.cancel();
      logger.info(
        why,
        'signal' in why
          ? 'stopping: finishing what is in flight'
          : 'stopping: the process that started llmgw (npm) has exited; finishing what is in flight',
      );
      const force = () => process.exit(1);
      process.once('SIGINT', force);
      process.once('SIGTERM', force);
      resolve();
    };
    const onSignal = (signal: NodeJS.Signals) => stop({ signal });
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    void watch?.gone.then(() => stop({ parent: 'gone' }));
  });
}
