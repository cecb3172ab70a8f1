import { randomUUID } from 'node:crypto';
import { join } from 'node:path';

import type { AttemptContext, Claim, Ending, ShardDriver } from '../driver.js';
import { LogBuffer } from '../log-buffer.js';
import { formatMs, healthPort } from '../readiness.js';
import { runHash } from '../run-hash.js';
import type { ShardRun } from '../types.js';
import { wait } from '../wait.js';
import { runTokenVariable, type Survey } from './leftovers.js';
import { PortHolders } from './port-holders.js';
import { ProcessGroup, SpawnError } from './process-group.js';
import { ProcessInstance, type ProcessInstanceContext } from './process-instance.js';
import { ProcessLeftovers } from './process-leftovers.js';
import { listProcesses } from './process-tree.js';
import { portUse, readListeners, socketInodes } from './sockets.js';

export interface ProcessDriverOptions {
  /** Each shard's log file goes here: `${logDir}/${replica}-r${rank}.log`. */
  logDir: string;
  logLines: number;
  logFileMaxBytes: number;
  /** Where the processes are recorded for the next agent; read at construction. */
  stateFile: string;
  /** Base environment of engines; ProcessSpec.env is added on top. */
  env: NodeJS.ProcessEnv;
  /** Ranks without health checks: ready once alive this long (for the starting reason). */
  settleMs: number;
  /** While another program holds a shard's port: how often to look again. */
  portRetryMs: number;
  now: () => number;
}

/**
 * Runs a shard's engine as processes of the agent (one process group each), recorded in a
 * state file so that the next agent takes them over. At construction it surveys what an
 * earlier agent recorded: engines still running as recorded wait to be claimed, stale ones
 * are stopped, and orphaned workers are killed.
 */
export class ProcessDriver implements ShardDriver<ProcessInstance> {
  readonly previousWords = 'the previous processes of this shard to exit';
  readonly leftovers: ProcessLeftovers;
  readonly #o: ProcessDriverOptions;
  /** Engines of this driver whose processes may still run. */
  readonly #live = new Set<ProcessInstance>();
  readonly #instances: ProcessInstanceContext;

  constructor(options: ProcessDriverOptions) {
    this.#o = options;
    // What an earlier agent of this node left running: taken over when desired again, else stopped.
    this.leftovers = new ProcessLeftovers(options.stateFile, (key) =>
      [...this.#live].some((i) => i.key === key),
    );
    this.#instances = {
      record: this.leftovers.record,
      ownPids: () => this.ownPids(),
      gone: (instance) => this.#live.delete(instance),
      now: options.now,
    };
  }

  hash(run: ShardRun): string {
    return runHash(run);
  }

  check(): void {
    // Every run has processes to start.
  }

  log(run: ShardRun): LogBuffer {
    const log = new LogBuffer({
      lines: this.#o.logLines,
      file: join(this.#o.logDir, logFileName(run)),
      maxFileBytes: this.#o.logFileMaxBytes,
    });
    log.watch();
    return log;
  }

  claim(run: ShardRun, hash: string, log: LogBuffer): Claim<ProcessInstance> {
    const found = this.leftovers.take(run.key);
    let adopted: ProcessInstance | undefined;
    if (found?.hash === hash) {
      adopted = this.#instance({ key: run.key, groups: found.groups, token: found.run, logStart: log.total });
      // Its recent output, for `logs` at once.
      log.loadRecent();
    } else if (found !== undefined) this.leftovers.stop(found);
    return {
      adopted,
      replaced: this.leftovers.stopping(run.key),
    };
  }

  async start(a: AttemptContext): Promise<ProcessInstance | Ending | undefined> {
    const { run, log } = a;
    const logStart = log.total;
    const holders = new PortHolders();
    const port = run.health === undefined ? undefined : healthPort(run.health);
    // An engine started on a port another program holds fails to bind, over and over: wait instead.
    if (port !== undefined && !(await this.#portFree(port, a, holders))) return undefined;
    a.set(
      'starting',
      run.health === undefined
        ? `starting: ready once it has run for ${formatMs(this.#o.settleMs)}`
        : 'starting the engine',
    );
    const instance = this.#instance({
      key: run.key,
      groups: [],
      token: `${run.key}:${randomUUID()}`,
      logStart,
      holders,
    });
    try {
      for (const spec of run.processes) {
        const group = await ProcessGroup.spawn({
          spec,
          env: { ...this.#o.env, [runTokenVariable]: instance.token },
          logFile: log.file ?? '/dev/null',
        });
        instance.groups.push(group);
        log.note(`started ${spec.name} (pid ${group.pid})`);
      }
    } catch (e) {
      await Promise.all(instance.groups.map((g) => g.kill()));
      this.#live.delete(instance);
      const reason =
        e instanceof SpawnError
          ? e.message
          : `cannot start ${run.processes[instance.groups.length]?.bin ?? 'the engine'}: ${String(e)}`;
      log.note(reason);
      return { reason, ran: true };
    }
    return instance;
  }

  /** What was found of the earlier agent's engines at construction, for the agent's log. */
  get adoption(): Survey {
    return this.leftovers.adoption;
  }

  unclaimed(): string[] {
    return this.leftovers.unclaimed();
  }

  releaseUnclaimed(keep: (key: string) => boolean): string[] {
    return this.leftovers.release(keep);
  }

  discardLeftovers(): Promise<void> {
    this.leftovers.release(() => false);
    return Promise.resolve();
  }

  pending(): Promise<void>[] {
    return this.leftovers.pending();
  }

  close(): void {
    // Nothing runs in the background.
  }

  detach(): void {
    this.leftovers.detach();
  }

  /**
   * Ports in `first..last` that a program other than these engines listens on (those of
   * engines that are stopping are theirs still); undefined where this machine cannot tell.
   */
  portsTaken(first: number, last: number): number[] | undefined {
    const listeners = readListeners();
    if (listeners === undefined) return undefined;
    const inRange = listeners.filter((l) => l.port >= first && l.port <= last);
    if (inRange.length === 0) return [];
    const ours = socketInodes(this.ownPids());
    return [...new Set(inRange.filter((l) => !ours.has(l.inode)).map((l) => l.port))].sort((a, b) => a - b);
  }

  /** Every process of this driver's engines, the earlier agent's too. */
  ownPids(): Set<number> {
    const processes = listProcesses();
    const out = new Set<number>();
    for (const instance of this.#live) for (const pid of instance.pids(processes)) out.add(pid);
    // The earlier agent's engines hold their ports too: they are this node's, not another program's.
    for (const pid of this.leftovers.pids(processes)) out.add(pid);
    return out;
  }

  #instance(o: {
    key: string;
    groups: ProcessGroup[];
    token: string;
    logStart: number;
    holders?: PortHolders;
  }): ProcessInstance {
    const instance = new ProcessInstance(this.#instances, { ...o, holders: o.holders ?? new PortHolders() });
    this.#live.add(instance);
    return instance;
  }

  /**
   * Waits while another program (or an engine of this node that is stopping) listens on
   * `port`. False when the shard stops meanwhile.
   */
  async #portFree(port: number, a: AttemptContext, holders: PortHolders): Promise<boolean> {
    let said: string | undefined;
    for (;;) {
      const own = this.ownPids();
      const taken = holders.takenBy(port, own);
      if (taken !== undefined) {
        const reason = `${taken.reason}: waiting for it to be free, or for the control plane to move this replica to a free port`;
        if (reason !== said) a.log.note(taken.reason);
        said = reason;
        a.set('failed', reason, { portTaken: taken.taken });
      } else if (portUse(port, own)?.ours === true) {
        said = undefined;
        a.set('starting', `waiting for port ${port}: an engine of this node that is stopping still holds it`);
      } else {
        return true;
      }
      if (!(await wait(this.#o.portRetryMs, a.signal))) return false;
    }
  }
}

/** `${replica}-r${rank}.log`, with anything a file name should not hold replaced. */
export function logFileName(run: Pick<ShardRun, 'replica' | 'rank'>): string {
  return `${run.replica.replace(/[^A-Za-z0-9._-]/g, '_')}-r${run.rank}.log`;
}
