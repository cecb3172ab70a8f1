import type { Exit } from './process-group.js';

/** How an engine's process ended, in words. */
export function describeExit(exit: Exit): string {
  if (exit.signal === null && exit.code === null)
    return 'exited (started by an earlier agent, so its exit status is not known here)';
  return exit.signal !== null ? `killed by ${exit.signal}` : `exited with code ${exit.code ?? 'unknown'}`;
}

/** `llama-server exited with code 1; its last error line: …`: the exit and its most telling line. */
export function exitReason(name: string, exit: Exit, lines: readonly string[]): string {
  let reason = `${name} ${describeExit(exit)}`;
  if (exit.signal === 'SIGKILL') reason += ' (often the out-of-memory killer: `dmesg` tells)';
  const error = lines.findLast((line) => /error/i.test(line));
  if (error !== undefined) reason += `; its last error line: ${error.trim().slice(0, 300)}`;
  return reason;
}
