import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { ShardSupervisor, type ShardSupervisorOptions } from '../supervisor.js';
import type { ShardStatus } from '../types.js';
import { engineEnv } from './engine-env.js';
import type { Survey } from './leftovers.js';
import { ProcessDriver } from './process-driver.js';
import type { ProcessInstance } from './process-instance.js';

export { logFileName } from './process-driver.js';

export interface SupervisorOptions extends Omit<ShardSupervisorOptions, 'onStatus'> {
  /** Each shard's log file goes here: `${logDir}/${replica}-r${rank}.log` (appended, rotated at ~10 MiB keeping one .1). */
  logDir: string;
  onStatus: (status: ShardStatus) => void;
  /** While another program holds a shard's port: how often to look again (default 2 s). */
  portRetryMs?: number;
  /** Ring buffer size per shard, default 2000 lines. */
  logLines?: number;
  /** The log file is rotated past this size (default 10 MiB). */
  logFileMaxBytes?: number;
  /**
   * Where the processes are recorded, for the next agent to adopt them; default
   * `${logDir}/../processes.json`. Read at construction: see `adoption`.
   */
  stateFile?: string;
  /**
   * Base environment of engines (default: what engineEnv keeps of process.env, never the
   * agent's own secrets); ProcessSpec.env is added on top.
   */
  env?: NodeJS.ProcessEnv;
}

/**
 * The agent's process supervisor: the shard supervisor with the process driver, which
 * runs each engine as process groups of the agent and takes over those an earlier agent
 * of this node left running.
 */
export class Supervisor extends ShardSupervisor<ProcessInstance> {
  readonly #driver: ProcessDriver;

  constructor(options: SupervisorOptions) {
    mkdirSync(options.logDir, { recursive: true });
    const driver = new ProcessDriver({
      logDir: options.logDir,
      logLines: options.logLines ?? 2000,
      logFileMaxBytes: options.logFileMaxBytes ?? 10 * 1024 * 1024,
      stateFile: options.stateFile ?? join(options.logDir, '..', 'processes.json'),
      env: options.env ?? engineEnv(process.env),
      settleMs: options.settleMs ?? 5000,
      portRetryMs: options.portRetryMs ?? 2000,
      now: options.now ?? Date.now,
    });
    super(driver, options);
    this.#driver = driver;
  }

  /** What was found of the earlier agent's engines at construction, for the agent's log. */
  get adoption(): Survey {
    return this.#driver.adoption;
  }

  /**
   * Ports in `first..last` that a program other than these engines listens on (those of
   * engines that are stopping are theirs still); undefined where this machine cannot tell.
   */
  portsTaken(first: number, last: number): number[] | undefined {
    return this.#driver.portsTaken(first, last);
  }
}
