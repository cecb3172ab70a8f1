import { randomUUID } from 'node:crypto';

import { describeExit, exitReason } from './exit-reason.js';
import { noGpuMemoryReason, watchGpuMemory } from '../gpu-check.js';
import { readBootId, runTokenVariable, type ProcessRecord, type RecordedProcess } from './leftovers.js';
import type { LogBuffer } from '../log-buffer.js';
import { ProcessGroup, SpawnError, type Exit, type StopOutcome } from './process-group.js';
import { groupMembers, listProcesses, processTree, readCmdline, type ProcStat } from './process-tree.js';
import {
  describeProbe,
  formatMs,
  healthPort,
  probeHealth,
  probeTimeout,
  startingReason,
  watchHealth,
} from '../readiness.js';
import { backoffMs } from '../restart-backoff.js';
import { describeHolder, findHolder, portUse, type Holder, type Listener } from './sockets.js';
import type {
  ExitReport,
  GpuProcessReader,
  PortTaken,
  ShardRun,
  ShardState,
  ShardStatus,
  ShardTiming,
} from '../types.js';
import { aborted, never, wait } from '../wait.js';

export interface ShardContext {
  log: LogBuffer;
  record: ProcessRecord;
  env: NodeJS.ProcessEnv;
  timing: ShardTiming;
  onStatus: (status: ShardStatus) => void;
  gpuProcesses: GpuProcessReader | undefined;
  /** Every process of this supervisor's engines, all shards: a port they hold is not another program's. */
  ownPids: () => ReadonlySet<number>;
  now: () => number;
}

/** Lines of output kept with an exit. */
const EXIT_TAIL = 20;

/** Why an attempt ended (undefined: it was stopped) and how its process exited. */
interface Ending {
  reason: string;
  exit?: Exit;
  portTaken?: PortTaken;
}

type Outcome =
  { kind: 'stop' } | { kind: 'exit'; group: ProcessGroup; exit: Exit } | { kind: 'recycle'; reason: string };

/**
 * One shard's processes, kept running: start, wait until ready, watch, restart with
 * backoff after each failure, until stopped. All of it happens in one loop (`#loop`), so
 * the processes of an attempt are always gone before the next attempt starts.
 */
export class Shard {
  #run: ShardRun;
  readonly hash: string;
  readonly #ctx: ShardContext;
  readonly #stopper = new AbortController();
  #done: Promise<void> = Promise.resolve();
  #state: ShardState = 'starting';
  #reason: string | undefined;
  /** While failed with a restart coming: when (ms, the context's clock). */
  #restartAt: number | undefined;
  #pid: number | undefined;
  #restarts = 0;
  /** Failures since the last stable run: the exponent of the backoff. */
  #failures = 0;
  #readySince: number | undefined;
  /** What the process record holds of this run's processes (spawned here). */
  #recorded: RecordedProcess[] | undefined;
  #lastExit: ExitReport | undefined;
  #portTaken: PortTaken | undefined;
  /** The processes of the attempt running now. */
  #groups: readonly ProcessGroup[] = [];
  /** The last holder found for a set of sockets: finding it scans every process. */
  #holder: { inodes: string; holder: Holder | undefined } | undefined;
  #lastEmitted = '';
  /** Processes an earlier agent started for this very run, taken over by the first attempt instead of a start. */
  #adopted: { groups: ProcessGroup[]; run: string } | undefined;
  /** Set by detach(): the processes are left running, recorded, for the next agent. */
  #detached = false;
  /** Whether the first attempt has been through its first readiness check (or ended). */
  #checked = false;

  constructor(run: ShardRun, hash: string, ctx: ShardContext) {
    this.#run = run;
    this.hash = hash;
    this.#ctx = ctx;
  }

  get key(): string {
    return this.#run.key;
  }

  /** Takes fields that need no restart (the stop grace). */
  update(run: ShardRun): void {
    this.#run = run;
  }

  /**
   * Starts the loop, once `after` (the previous processes of this key stopping) has settled
   * when given. `adopted`: the processes an earlier agent started for this same run (its
   * hash matched), which the first attempt takes over instead of starting new ones.
   */
  start(after?: Promise<void>, adopted?: { groups: ProcessGroup[]; run: string }): void {
    this.#adopted = adopted;
    this.#done = this.#loop(after).catch((e: unknown) => {
      // A bug here must not leave the shard looking alive.
      this.#set('failed', `the supervisor failed: ${e instanceof Error ? e.message : String(e)}`);
    });
  }

  /** Whether this shard was adopted and has had its first readiness check (or ended): its state is then known. */
  get checked(): boolean {
    return this.#checked;
  }

  /**
   * Stops watching and leaves the processes running, recorded, for the next agent to adopt
   * (the agent exits for a restart or an upgrade). Resolves once the loop has ended.
   */
  detach(): Promise<void> {
    this.#detached = true;
    this.#stopper.abort();
    return this.#done;
  }

  /** Stops the processes (SIGTERM, SIGKILL after the grace) and resolves once they are gone. */
  stop(): Promise<void> {
    if (!this.#stopper.signal.aborted) {
      this.#set('stopping', undefined);
      this.#stopper.abort();
    }
    return this.#done;
  }

  status(): ShardStatus {
    const s: ShardStatus = {
      key: this.#run.key,
      replica: this.#run.replica,
      rank: this.#run.rank,
      state: this.#state,
      restarts: this.#restarts,
    };
    if (this.#reason !== undefined) s.reason = this.#reason;
    if (this.#restartAt !== undefined) s.restart_at = new Date(this.#restartAt).toISOString();
    if (this.#pid !== undefined) s.pid = this.#pid;
    if (this.#readySince !== undefined) s.ready_since = new Date(this.#readySince).toISOString();
    if (this.#lastExit !== undefined) s.last_exit = this.#lastExit;
    if (this.#portTaken !== undefined) s.port_taken = this.#portTaken;
    return s;
  }

  /** The live processes of this shard's engines: each leader, its descendants and its group. */
  pids(processes: readonly ProcStat[]): number[] {
    return this.#groups.flatMap((g) =>
      g.gone() ? [] : [...processTree(g.pid, processes), ...groupMembers(g.pid, processes)],
    );
  }

  async #loop(after: Promise<void> | undefined): Promise<void> {
    const stop = this.#stopper.signal;
    if (after !== undefined) {
      this.#set('starting', 'waiting for the previous processes of this shard to exit');
      await Promise.race([after, aborted(stop)]);
    }
    if (this.#run.processes.length === 0) {
      this.#set('failed', 'the shard has no process to run: its engine gave no command');
      return;
    }
    while (!this.#stopping()) {
      const ending = await this.#attempt();
      // An exit may race a stop: the stop wins.
      if (ending === undefined || this.#stopping()) return;
      const now = this.#ctx.now();
      const { failures, delay } = this.#nextAttempt(now);
      this.#failures = failures + 1;
      this.#restarts++;
      this.#readySince = undefined;
      this.#pid = undefined;
      this.#set(
        'failed',
        `${ending.reason}; restarting in ${formatMs(delay)}`,
        ending.portTaken,
        now + delay,
      );
      if (!(await wait(delay, stop))) return;
    }
  }

  /** For a run that ends at `now`: the failures its backoff counts (none after a stable run), and its wait. */
  #nextAttempt(now: number): { failures: number; delay: number } {
    const stable = this.#readySince !== undefined && now - this.#readySince >= this.#ctx.timing.stableMs;
    const failures = stable ? 0 : this.#failures;
    return { failures, delay: backoffMs(failures, this.#ctx.timing.backoff) };
  }

  /** One run of the processes, from spawn (or adoption) to gone. Undefined when it ended because the shard stops. */
  async #attempt(): Promise<Ending | undefined> {
    const run = this.#run;
    const { log, record } = this.#ctx;
    const logStart = log.total;
    const adopted = this.#adopted;
    this.#adopted = undefined;
    const token = adopted?.run ?? `${run.key}:${randomUUID()}`;
    const port = run.health === undefined ? undefined : healthPort(run.health);
    const groups: ProcessGroup[] = [];
    if (adopted !== undefined) {
      groups.push(...adopted.groups);
      this.#groups = groups;
      for (const g of groups) log.note(`adopted ${g.name} (pid ${g.pid}), started by an earlier agent`);
      this.#set('starting', 'adopted from the previous agent: checking its health');
    } else {
      // An engine started on a port another program holds fails to bind, over and over: wait instead.
      if (port !== undefined && !(await this.#portFree(port))) return undefined;
      this.#set(
        'starting',
        run.health === undefined
          ? `starting: ready once it has run for ${formatMs(this.#ctx.timing.settleMs)}`
          : 'starting the engine',
      );
      try {
        for (const spec of run.processes) {
          const group = await ProcessGroup.spawn({
            spec,
            env: { ...this.#ctx.env, [runTokenVariable]: token },
            logFile: log.file ?? '/dev/null',
          });
          groups.push(group);
          this.#groups = groups;
          log.note(`started ${spec.name} (pid ${group.pid})`);
        }
      } catch (e) {
        await Promise.all(groups.map((g) => g.kill()));
        const reason =
          e instanceof SpawnError
            ? e.message
            : `cannot start ${run.processes[groups.length]?.bin ?? 'the engine'}: ${String(e)}`;
        log.note(reason);
        return this.#stopping() ? undefined : { reason };
      }
    }
    this.#pid = groups[0]?.pid;
    const bootId = readBootId();
    this.#recorded = groups.map((g, i) => {
      const spec = run.processes[i];
      const entry: RecordedProcess = {
        key: run.key,
        name: g.name,
        pid: g.pid,
        pgid: g.pid,
        command: spec === undefined ? [] : [spec.bin, ...spec.args],
        run: token,
        hash: this.hash,
        stopGraceMs: run.stopGraceMs,
      };
      // Read at the spawn: the start time is the fork's, so it is right even before the exec.
      if (g.startTime !== undefined) entry.startTime = g.startTime;
      if (bootId !== undefined) entry.bootId = bootId;
      return entry;
    });
    record.set(run.key, this.#recorded);
    this.#emit();

    const attempt = new AbortController();
    const signal = AbortSignal.any([this.#stopper.signal, attempt.signal]);
    const outcome = await Promise.race<Outcome>([
      // The attempt's signal, not the shard's: it is aborted below, so no listener outlives the attempt.
      aborted(signal).then(() => ({ kind: 'stop' as const })),
      ...groups.map((group) => group.exited.then((exit) => ({ kind: 'exit' as const, group, exit }))),
      this.#watch(groups, signal, adopted !== undefined).then((reason) => ({
        kind: 'recycle' as const,
        reason,
      })),
    ]);
    attempt.abort();
    this.#checked = true;
    if (outcome.kind === 'stop' && this.#detached) {
      // Left running for the next agent: its record stays, and nothing here waits for it.
      for (const g of groups) g.release();
      log.note('the agent exits: left running for the next agent to adopt');
      log.readNow();
      this.#groups = [];
      return undefined;
    }
    // Its processes stop first, then the backoff: a restart comes no sooner than this.
    if (outcome.kind === 'recycle') {
      const now = this.#ctx.now();
      this.#set('failed', outcome.reason, undefined, now + this.#nextAttempt(now).delay);
    }

    let ending: Ending | undefined;
    if (outcome.kind === 'exit') {
      // What is left of the crashed engine's group is orphaned workers: no grace for them.
      // Other processes of the shard get theirs.
      await Promise.all(groups.map((g) => (g === outcome.group ? g.kill() : this.#terminate(g))));
    } else {
      await Promise.all(groups.map((g) => this.#terminate(g)));
    }
    // Its output is all in the file once its processes are gone.
    log.readNow(true);
    record.set(run.key, []);

    this.#groups = [];
    if (outcome.kind === 'exit') {
      const lines = log.tail(EXIT_TAIL, logStart);
      // An engine that exits before it was ready while another program holds its port could not bind it.
      const taken =
        port !== undefined && this.#readySince === undefined
          ? this.#takenBy(port, this.#ctx.ownPids())
          : undefined;
      ending =
        taken === undefined
          ? { reason: exitReason(outcome.group.name, outcome.exit, lines), exit: outcome.exit }
          : {
              reason: `${outcome.group.name} ${describeExit(outcome.exit)}: ${taken.reason}`,
              exit: outcome.exit,
              portTaken: taken.taken,
            };
      log.note(`${outcome.group.name} ${describeExit(outcome.exit)}`);
    } else if (outcome.kind === 'stop') {
      log.note('stopped');
    } else {
      const exit = groups[0]?.exit;
      ending = exit === undefined ? { reason: outcome.reason } : { reason: outcome.reason, exit };
      log.note(outcome.reason);
    }
    if (ending?.exit !== undefined) {
      this.#lastExit = {
        code: ending.exit.code,
        signal: ending.exit.signal,
        at: new Date(this.#ctx.now()).toISOString(),
        log_tail: log.tail(EXIT_TAIL, logStart),
      };
    }
    return outcome.kind === 'stop' ? undefined : ending;
  }

  async #terminate(group: ProcessGroup): Promise<StopOutcome> {
    const grace = this.#run.stopGraceMs;
    const outcome = await group.terminate(grace);
    if (outcome === 'killed')
      this.#ctx.log.note(
        `${group.name} (pid ${group.pid}) still ran ${formatMs(grace)} after SIGTERM: killed`,
      );
    if (outcome === 'stuck')
      this.#ctx.log.note(
        `${group.name} (pid ${group.pid}) survived SIGKILL (stuck in the kernel, often a GPU driver hang)`,
      );
    return outcome;
  }

  /**
   * Waits while another program (or an engine of this node that is stopping) listens on
   * `port`. False when the shard stops meanwhile.
   */
  async #portFree(port: number): Promise<boolean> {
    for (;;) {
      const own = this.#ctx.ownPids();
      const taken = this.#takenBy(port, own);
      if (taken !== undefined) {
        const reason = `${taken.reason}: waiting for it to be free, or for the control plane to move this replica to a free port`;
        if (reason !== this.#reason) this.#ctx.log.note(taken.reason);
        this.#set('failed', reason, taken.taken);
      } else if (portUse(port, own)?.ours === true) {
        this.#set(
          'starting',
          `waiting for port ${port}: an engine of this node that is stopping still holds it`,
        );
      } else {
        return true;
      }
      if (!(await wait(this.#ctx.timing.portRetryMs, this.#stopper.signal))) return false;
    }
  }

  /** Whether a program not among `own` listens on `port`, and who, in words. */
  #takenBy(port: number, own: Iterable<number>): { reason: string; taken: PortTaken } | undefined {
    const others = portUse(port, own)?.others ?? [];
    if (others.length === 0) return undefined;
    const holder = this.#holderOf(others, new Set(own));
    return {
      reason: `port ${port} is taken by ${describeHolder(holder, others)}`,
      taken: { port, ...(holder === undefined ? {} : { pid: holder.pid, name: holder.name }) },
    };
  }

  #holderOf(listeners: readonly Listener[], skip: ReadonlySet<number>): Holder | undefined {
    const inodes = listeners
      .map((l) => l.inode)
      .sort((a, b) => a - b)
      .join(',');
    if (this.#holder?.inodes !== inodes)
      this.#holder = { inodes, holder: findHolder(new Set(listeners.map((l) => l.inode)), skip) };
    return this.#holder.holder;
  }

  /**
   * Whether the answer on the health port can be the engine's: one of its processes holds a
   * listening socket on it. Undefined when it can, or when this machine cannot tell (no
   * /proc); else why the answer does not count.
   */
  #notOwn(groups: readonly ProcessGroup[], port: number): { reason: string; taken?: PortTaken } | undefined {
    const processes = listProcesses();
    const pids = groups.flatMap((g) => [...processTree(g.pid, processes), ...groupMembers(g.pid, processes)]);
    const use = portUse(port, pids);
    if (use === undefined || use.ours) return undefined;
    const name = groups[0]?.name ?? 'the engine';
    if (use.others.length === 0)
      return { reason: `port ${port} answered, but ${name} does not listen on it (yet)` };
    const taken = this.#takenBy(port, this.#ctx.ownPids());
    return {
      reason: `port ${port} answers, but from ${describeHolder(this.#holderOf(use.others, new Set(pids)), use.others)}, not from ${name}: its answers do not count`,
      ...(taken === undefined ? {} : { taken: taken.taken }),
    };
  }

  /**
   * Readiness, then health while ready. Resolves with a reason to restart the shard
   * (never ready in time, stopped answering); never resolves otherwise.
   */
  async #watch(groups: ProcessGroup[], signal: AbortSignal, adopted: boolean): Promise<string> {
    const { timing, now } = this.#ctx;
    const health = this.#run.health;
    const deadline = now() + timing.readyTimeoutMs;
    if (health === undefined) {
      // An adopted rank has run a while already.
      if (!adopted && !(await wait(timing.settleMs, signal))) return never();
    } else {
      const port = healthPort(health);
      for (;;) {
        const probe = await probeHealth(health, probeTimeout(timing.startingIntervalMs));
        if (signal.aborted) return never();
        // Only the engine's own answer counts: another program on its port must not make it ready.
        const foreign = probe.kind === 'ok' && port !== undefined ? this.#notOwn(groups, port) : undefined;
        if (probe.kind === 'ok' && foreign === undefined) break;
        this.#checked = true;
        if (now() >= deadline) {
          return `not ready after ${formatMs(timing.readyTimeoutMs)} (last health check: ${foreign?.reason ?? describeProbe(probe, health)}); raise the ready timeout if the model loads slower than that`;
        }
        if (foreign !== undefined) this.#set('starting', foreign.reason, foreign.taken);
        else this.#set('starting', startingReason(probe, health));
        if (!(await wait(timing.startingIntervalMs, signal))) return never();
      }
    }
    this.#readySince = now();
    this.#checked = true;
    this.#recordCmdlines();
    const degraded = this.#run.degradedReason;
    if (degraded !== undefined) this.#set('degraded', degraded);
    else this.#set('ready', undefined);
    const gpu = this.#run.gpu;
    const reader = this.#ctx.gpuProcesses;
    if (degraded === undefined && gpu !== undefined && gpu.uuids.length > 0 && reader !== undefined) {
      void this.#watchGpu(groups, gpu.uuids, reader, signal);
    }
    return health === undefined ? never() : watchHealth(health, this.#ctx.timing.readyIntervalMs, signal);
  }

  /** Checks, after a delay and then now and again, that the engine holds memory on its GPUs. */
  async #watchGpu(
    groups: ProcessGroup[],
    uuids: string[],
    reader: GpuProcessReader,
    signal: AbortSignal,
  ): Promise<void> {
    const { timing } = this.#ctx;
    await watchGpuMemory({
      uuids,
      reader,
      pids: () => {
        const processes = listProcesses();
        return groups.flatMap((g) => [...processTree(g.pid, processes), ...groupMembers(g.pid, processes)]);
      },
      delayMs: timing.gpuCheckDelayMs,
      intervalMs: timing.gpuCheckIntervalMs,
      signal,
      onCheck: (holds) => {
        if (holds) this.#set('ready', undefined);
        else this.#set('degraded', noGpuMemoryReason(uuids));
      },
    });
  }

  #stopping(): boolean {
    return this.#stopper.signal.aborted;
  }

  /** Once ready, each process's command line as /proc shows it (after a wrapper's exec), for the next agent to know it by. */
  #recordCmdlines(): void {
    const recorded = this.#recorded;
    if (recorded === undefined || recorded.every((r) => r.cmdline !== undefined)) return;
    this.#recorded = recorded.map((r) => {
      const cmdline = readCmdline(r.pid);
      return cmdline === undefined ? r : { ...r, cmdline };
    });
    this.#ctx.record.set(this.#run.key, this.#recorded);
  }

  /** `restartAt`: failed, and this loop starts it again then by itself. */
  #set(state: ShardState, reason: string | undefined, portTaken?: PortTaken, restartAt?: number): void {
    // Once stopping, only the stop speaks.
    if (this.#stopping() && state !== 'stopping') return;
    this.#state = state;
    this.#reason = reason;
    this.#portTaken = portTaken;
    this.#restartAt = restartAt;
    this.#emit();
  }

  #emit(): void {
    const status = this.status();
    const text = JSON.stringify(status);
    if (text === this.#lastEmitted) return;
    this.#lastEmitted = text;
    try {
      this.#ctx.onStatus(status);
    } catch {
      // The listener's failure must not stop the supervision.
    }
  }
}
