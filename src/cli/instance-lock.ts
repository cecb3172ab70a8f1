import { join } from 'node:path';

import { acquireLock, type HeldLock } from '../agent/installer/install-lock.js';
import { LlmgwError } from '../core/errors.js';

/**
 * One llmgw per SQLite database and one agent per data dir: a second `llmgw up` in the same
 * directory would otherwise run a second control plane on the same file, and a second agent
 * that takes the first one's engines for leftovers of a crash.
 */
async function alone(path: string, refusal: (holder: string) => string): Promise<HeldLock> {
  return acquireLock(path, {
    onWait: (h) => {
      throw new LlmgwError(
        'conflict',
        refusal(h === undefined ? 'another llmgw' : `another llmgw (pid ${h.pid} on ${h.host})`),
      );
    },
  });
}

/** The control plane's hold on its SQLite database. */
export function lockDatabase(file: string): Promise<HeldLock> {
  return alone(
    `${file}.lock`,
    (holder) =>
      `the SQLite database ${file} is in use by ${holder}: stop that one first, or give this one a data dir of its own (--config, or LLMGW_DATA_DIR); control planes share a PostgreSQL database, not an SQLite one`,
  );
}

/** The agent's hold on its data dir (its identity, and the engines it started). */
export function lockAgentDir(dataDir: string): Promise<HeldLock> {
  return alone(
    join(dataDir, 'agent.lock'),
    (holder) =>
      `the data dir ${dataDir} is in use by the agent of ${holder}: stop that one first, or give this one a data dir of its own (LLMGW_DATA_DIR)`,
  );
}
