import type { AttemptContext, EndKind, Ending, Instance, Judged } from '../driver.js';
import { formatMs, healthPort, type Health, type Probe } from '../readiness.js';
import type { ExitReport } from '../types.js';
import { describeExit, exitReason } from './exit-reason.js';
import { readBootId, type ProcessRecord, type RecordedProcess } from './leftovers.js';
import type { PortHolders } from './port-holders.js';
import type { Exit, ProcessGroup, StopOutcome } from './process-group.js';
import { groupMembers, listProcesses, processTree, readCmdline, type ProcStat } from './process-tree.js';
import { describeHolder, portUse } from './sockets.js';

/** Lines of output kept with an exit. */
const EXIT_TAIL = 20;

/** What the process driver shares with each of its engines. */
export interface ProcessInstanceContext {
  record: ProcessRecord;
  /** Every process of this driver's engines, all shards: a port they hold is not another program's. */
  ownPids: () => ReadonlySet<number>;
  /** Called once the engine's processes are gone or left to the next agent. */
  gone: (instance: ProcessInstance) => void;
  now: () => number;
}

/**
 * One shard's engine processes (one group each): spawned by the driver, or an earlier
 * agent's taken over, recorded for the next agent, ended with their grace.
 */
export class ProcessInstance implements Instance {
  readonly noGpuFix =
    'use a GPU build of the engine (llama.cpp: the Vulkan or a CUDA archive), or check the driver';
  readonly groups: ProcessGroup[];
  /** The run token in the engines' environment: how the next agent knows them. */
  readonly token: string;
  /** The shard's key. */
  readonly key: string;
  readonly #ctx: ProcessInstanceContext;
  readonly #holders: PortHolders;
  /** Where this attempt's output starts in the shard's log. */
  #logStart: number;
  #a: AttemptContext | undefined;
  #recorded: RecordedProcess[] | undefined;
  #exited: Promise<{ group: ProcessGroup; exit: Exit }> | undefined;

  constructor(
    ctx: ProcessInstanceContext,
    o: { key: string; groups: ProcessGroup[]; token: string; logStart: number; holders: PortHolders },
  ) {
    this.#ctx = ctx;
    this.groups = o.groups;
    this.token = o.token;
    this.key = o.key;
    this.#logStart = o.logStart;
    this.#holders = o.holders;
  }

  get pid(): number | undefined {
    return this.groups[0]?.pid;
  }

  /** The live processes of this engine: each leader, its descendants and its group. */
  pids(processes: readonly ProcStat[]): number[] {
    return this.groups.flatMap((g) =>
      g.gone() ? [] : [...processTree(g.pid, processes), ...groupMembers(g.pid, processes)],
    );
  }

  take(a: AttemptContext, adopted: boolean): Promise<void> {
    this.#a = a;
    const { run, log } = a;
    if (adopted) {
      this.#logStart = log.total;
      for (const g of this.groups) log.note(`adopted ${g.name} (pid ${g.pid}), started by an earlier agent`);
    }
    const bootId = readBootId();
    this.#recorded = this.groups.map((g, i) => {
      const spec = run.processes[i];
      const entry: RecordedProcess = {
        key: run.key,
        name: g.name,
        pid: g.pid,
        pgid: g.pid,
        command: spec === undefined ? [] : [spec.bin, ...spec.args],
        run: this.token,
        hash: a.hash,
        stopGraceMs: run.stopGraceMs,
      };
      // Read at the spawn: the start time is the fork's, so it is right even before the exec.
      if (g.startTime !== undefined) entry.startTime = g.startTime;
      if (bootId !== undefined) entry.bootId = bootId;
      return entry;
    });
    this.#ctx.record.set(run.key, this.#recorded);
    return Promise.resolve();
  }

  exited(): Promise<void> {
    this.#exited ??= Promise.race(this.groups.map((group) => group.exited.then((exit) => ({ group, exit }))));
    return this.#exited.then(() => undefined);
  }

  judge(probe: Probe, health: Health): Judged {
    const port = healthPort(health);
    const foreign = probe.kind === 'ok' && port !== undefined ? this.#notOwn(port) : undefined;
    return { probe, foreign };
  }

  gpuPids(): () => readonly number[] {
    return () => {
      const processes = listProcesses();
      return this.groups.flatMap((g) => [
        ...processTree(g.pid, processes),
        ...groupMembers(g.pid, processes),
      ]);
    };
  }

  /** Once ready, each process's command line as /proc shows it (after a wrapper's exec), for the next agent to know it by. */
  ready(): void {
    const recorded = this.#recorded;
    const a = this.#a;
    if (a === undefined || recorded === undefined || recorded.every((r) => r.cmdline !== undefined)) return;
    this.#recorded = recorded.map((r) => {
      const cmdline = readCmdline(r.pid);
      return cmdline === undefined ? r : { ...r, cmdline };
    });
    this.#ctx.record.set(a.run.key, this.#recorded);
  }

  release(): Promise<void> {
    // Its record stays, and nothing here waits for it.
    for (const g of this.groups) g.release();
    const log = this.#a?.log;
    log?.note('the agent exits: left running for the next agent to adopt');
    log?.readNow();
    this.#ctx.gone(this);
    return Promise.resolve();
  }

  async end(
    how: EndKind,
    c: { reason?: string; wasReady: boolean },
  ): Promise<{ ending?: Ending; lastExit?: ExitReport }> {
    const a = this.#a;
    if (a === undefined) throw new Error('an engine ended before it was taken up');
    const { log, run } = a;
    const first = how === 'exit' ? await this.#exited : undefined;
    // What is left of the crashed engine's group is orphaned workers: no grace for them.
    // Other processes of the shard get theirs.
    await Promise.all(this.groups.map((g) => (g === first?.group ? g.kill() : this.#terminate(g))));
    // Its output is all in the file once its processes are gone.
    log.readNow(true);
    this.#ctx.record.set(run.key, []);
    this.#ctx.gone(this);
    let ending: (Ending & { exit?: Exit }) | undefined;
    if (first !== undefined) {
      const lines = log.tail(EXIT_TAIL, this.#logStart);
      const port = run.health === undefined ? undefined : healthPort(run.health);
      // An engine that exits before it was ready while another program holds its port could not bind it.
      const taken =
        port !== undefined && !c.wasReady ? this.#holders.takenBy(port, this.#ctx.ownPids()) : undefined;
      ending =
        taken === undefined
          ? { reason: exitReason(first.group.name, first.exit, lines), exit: first.exit, ran: true }
          : {
              reason: `${first.group.name} ${describeExit(first.exit)}: ${taken.reason}`,
              exit: first.exit,
              portTaken: taken.taken,
              ran: true,
            };
      log.note(`${first.group.name} ${describeExit(first.exit)}`);
    } else if (how === 'stop') {
      log.note('stopped');
    } else {
      const reason = c.reason ?? 'recycled';
      const exit = this.groups[0]?.exit;
      ending = exit === undefined ? { reason, ran: true } : { reason, exit, ran: true };
      log.note(reason);
    }
    if (ending?.exit === undefined) return ending === undefined ? {} : { ending };
    const { exit, ...rest } = ending;
    return {
      ending: rest,
      lastExit: {
        code: exit.code,
        signal: exit.signal,
        at: new Date(this.#ctx.now()).toISOString(),
        log_tail: log.tail(EXIT_TAIL, this.#logStart),
      },
    };
  }

  async #terminate(group: ProcessGroup): Promise<StopOutcome> {
    const grace = this.#a?.run.stopGraceMs ?? 10_000;
    const log = this.#a?.log;
    const outcome = await group.terminate(grace);
    if (outcome === 'killed')
      log?.note(`${group.name} (pid ${group.pid}) still ran ${formatMs(grace)} after SIGTERM: killed`);
    if (outcome === 'stuck')
      log?.note(
        `${group.name} (pid ${group.pid}) survived SIGKILL (stuck in the kernel, often a GPU driver hang)`,
      );
    return outcome;
  }

  /**
   * Whether the answer on the health port can be the engine's: one of its processes holds a
   * listening socket on it. Undefined when it can, or when this machine cannot tell (no
   * /proc); else why the answer does not count.
   */
  #notOwn(port: number): Judged['foreign'] {
    const processes = listProcesses();
    const pids = this.groups.flatMap((g) => [
      ...processTree(g.pid, processes),
      ...groupMembers(g.pid, processes),
    ]);
    const use = portUse(port, pids);
    if (use === undefined || use.ours) return undefined;
    const name = this.groups[0]?.name ?? 'the engine';
    if (use.others.length === 0)
      return { reason: `port ${port} answered, but ${name} does not listen on it (yet)` };
    const taken = this.#holders.takenBy(port, this.#ctx.ownPids());
    return {
      reason: `port ${port} answers, but from ${describeHolder(this.#holders.holderOf(use.others, new Set(pids)), use.others)}, not from ${name}: its answers do not count`,
      ...(taken === undefined ? {} : { taken: taken.taken }),
    };
  }
}
