import { killOrphans, ProcessRecord, survey, type FoundShard, type Survey } from './leftovers.js';
import { ProcessGroup } from './process-group.js';
import { groupMembers, processTree, type ProcStat } from './process-tree.js';

/** An earlier agent's engine, taken over for watching until claimed or stopped. */
export interface Unclaimed {
  key: string;
  hash: string | undefined;
  run: string;
  stopGraceMs: number;
  groups: ProcessGroup[];
}

/**
 * What an earlier agent of this node left running, as its state file recorded it: read at
 * construction, where engines still running as recorded wait to be claimed, stale ones are
 * stopped, and orphaned workers are killed.
 */
export class ProcessLeftovers {
  /** What was found at construction, for the agent's log. */
  readonly adoption: Survey;
  readonly record: ProcessRecord;
  /** Engines running as recorded, not yet claimed by a desired shard of the same run. */
  readonly #adoptable = new Map<string, Unclaimed>();
  /** Engines being stopped (not adoptable, unassigned or changed), by key, until gone. */
  readonly #stopping = new Map<string, { groups: ProcessGroup[]; done: Promise<void> }>();
  /** Whether a shard of this key runs engines of its own now (they record themselves). */
  readonly #live: (key: string) => boolean;

  constructor(stateFile: string, live: (key: string) => boolean) {
    this.#live = live;
    this.adoption = survey(stateFile);
    const found = [...this.adoption.adoptable, ...this.adoption.stale];
    this.record = new ProcessRecord(
      stateFile,
      found.flatMap((f) => f.processes),
    );
    for (const o of this.adoption.orphans) killOrphans(o.pids);
    for (const f of this.adoption.adoptable) this.#adoptable.set(f.key, unclaimed(f));
    for (const f of this.adoption.stale) this.stop(unclaimed(f));
  }

  /** Takes the engine left for `key` out of the adoptable ones. */
  take(key: string): Unclaimed | undefined {
    const found = this.#adoptable.get(key);
    this.#adoptable.delete(key);
    return found;
  }

  /** Resolves once an engine of `key` being stopped is gone. */
  stopping(key: string): Promise<void> | undefined {
    return this.#stopping.get(key)?.done;
  }

  unclaimed(): string[] {
    return [...this.#adoptable.keys()];
  }

  release(keep: (key: string) => boolean): string[] {
    const out: string[] = [];
    for (const [key, u] of this.#adoptable) {
      if (keep(key)) continue;
      this.#adoptable.delete(key);
      this.stop(u);
      out.push(key);
    }
    return out;
  }

  pending(): Promise<void>[] {
    return [...this.#stopping.values()].map((s) => s.done);
  }

  /** Leaves the unclaimed ones running for the next agent. */
  detach(): void {
    for (const u of this.#adoptable.values()) for (const g of u.groups) g.release();
    this.#adoptable.clear();
  }

  /** Their processes: a port they hold is this node's, not another program's. */
  pids(processes: readonly ProcStat[]): number[] {
    const groups = [...this.#adoptable.values(), ...this.#stopping.values()].flatMap((u) => u.groups);
    return groups.flatMap((g) => [...processTree(g.pid, processes), ...groupMembers(g.pid, processes)]);
  }

  /** Stops an earlier agent's engine (SIGTERM to its groups, SIGKILL after its grace), and drops its record once gone. */
  stop(u: Unclaimed): void {
    if (this.#stopping.has(u.key)) return;
    const done = Promise.all(u.groups.map((g) => g.terminate(u.stopGraceMs))).then(() => {
      this.#stopping.delete(u.key);
      // A shard of this key started meanwhile records its own processes once these are gone.
      if (!this.#live(u.key)) this.record.set(u.key, []);
    });
    this.#stopping.set(u.key, { groups: u.groups, done });
  }
}

function unclaimed(f: FoundShard): Unclaimed {
  const first = f.processes[0];
  return {
    key: f.key,
    hash: first?.hash,
    run: first?.run ?? '',
    stopGraceMs: first?.stopGraceMs ?? 10_000,
    groups: f.processes.map((p) =>
      ProcessGroup.adopt({ name: p.name, pid: p.pid, startTime: p.startTime ?? 0, run: p.run }),
    ),
  };
}
