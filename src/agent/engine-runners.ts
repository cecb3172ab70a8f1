import { messageOf } from '../core/errors.js';

import type { Supervisor } from './shards/process/process-supervisor.js';
import type { ShardRun, ShardRunner, ShardStatus } from './shards/types.js';

/**
 * What the shard executor needs of whatever runs its engines: a shard supervisor's
 * surface, with the earlier agent's engines and the ports other programs hold.
 */
export interface EngineRunner extends ShardRunner {
  unclaimed(): string[];
  releaseUnclaimed(keep?: (key: string) => boolean): string[];
  portsTaken(first: number, last: number): number[] | undefined;
}

export interface EngineRunnersOptions {
  supervisor: Pick<Supervisor, keyof EngineRunner>;
  /**
   * Connects to this node's container daemon and makes the container supervisor; called
   * when a run first needs one. Rejects, in words, when no daemon answers.
   */
  containers?: (() => Promise<ShardRunner>) | undefined;
  /**
   * Called once the container supervisor is made, to build the runs again with what the
   * daemon said (how it takes GPUs); when it applies nothing, the runs held are applied.
   */
  onContainers?: () => void;
  /** Statuses changed outside the runners' own reports (connecting, a daemon that does not answer). */
  onChange: () => void;
  /** How long after a daemon did not answer it is asked again (default 30 s). */
  retryMs?: number;
}

/**
 * The agent's engines, however each runs: runs with `container` set go to the container
 * supervisor (made on first need), the rest to the process supervisor; statuses, logs and
 * stops cover both. A container run on a node whose daemon does not answer fails with why.
 */
export class EngineRunners implements EngineRunner {
  readonly #o: EngineRunnersOptions;
  #runner: ShardRunner | undefined;
  #connecting: Promise<void> | undefined;
  #failure: { reason: string; at: number } | undefined;
  #retry: NodeJS.Timeout | undefined;
  /** The container runs wanted now. */
  #containerRuns: ShardRun[] = [];
  #applied = 0;

  constructor(options: EngineRunnersOptions) {
    this.#o = options;
  }

  /** The container supervisor, once made. */
  get containers(): ShardRunner | undefined {
    return this.#runner;
  }

  unclaimed(): string[] {
    return this.#o.supervisor.unclaimed();
  }

  /**
   * An earlier agent's engine process for a shard that now runs as a container is not
   * kept for it: nothing would claim it, and it holds the shard's port and GPUs.
   */
  releaseUnclaimed(keep: (key: string) => boolean = () => false): string[] {
    return this.#o.supervisor.releaseUnclaimed(
      (key) => keep(key) && !this.#containerRuns.some((r) => r.key === key),
    );
  }

  apply(desired: readonly ShardRun[]): void {
    this.#applied++;
    this.#o.supervisor.apply(desired.filter((r) => r.container === undefined));
    this.#containerRuns = desired.filter((r) => r.container !== undefined);
    if (this.#runner !== undefined) this.#runner.apply(this.#containerRuns);
    else if (this.#containerRuns.length > 0) this.#connect();
  }

  /**
   * Makes the container supervisor now, with no container run wanted: on a node that ran
   * containers before, so that those an earlier agent left and no assignment claims are
   * removed after their grace, rather than kept until the next container profile comes.
   */
  connectContainers(): void {
    if (this.#runner === undefined) this.#connect();
  }

  statuses(): ShardStatus[] {
    const out: ShardStatus[] = [...this.#o.supervisor.statuses()];
    if (this.#runner !== undefined) return [...out, ...this.#runner.statuses()];
    for (const run of this.#containerRuns) {
      const failure = this.#failure;
      out.push({
        key: run.key,
        replica: run.replica,
        rank: run.rank,
        state: failure === undefined ? 'starting' : 'failed',
        reason: failure?.reason ?? 'connecting to the container daemon',
        restarts: 0,
      });
    }
    return out;
  }

  logs(key: string, tail?: number): string[] {
    return this.#isContainer(key)
      ? (this.#runner?.logs(key, tail) ?? [])
      : this.#o.supervisor.logs(key, tail);
  }

  follow(key: string, listener: (line: string) => void): () => void {
    if (!this.#isContainer(key)) return this.#o.supervisor.follow(key, listener);
    return this.#runner?.follow(key, listener) ?? (() => undefined);
  }

  /**
   * Ports other programs hold, as the process supervisor sees them, less those of the
   * container shards: the daemon's port forwarder (docker-proxy, rootlessport) or the
   * engine itself on host networking holds them for a shard of ours.
   */
  portsTaken(first: number, last: number): number[] | undefined {
    const taken = this.#o.supervisor.portsTaken(first, last);
    if (taken === undefined || this.#containerRuns.length === 0) return taken;
    const ours = new Set(this.#containerRuns.flatMap(runPorts));
    return taken.filter((p) => !ours.has(p));
  }

  async stopped(): Promise<void> {
    await Promise.all([this.#o.supervisor.stopped(), this.#runner?.stopped()]);
  }

  async stopAll(): Promise<void> {
    this.#quiet();
    await this.#connecting;
    await Promise.all([this.#o.supervisor.stopAll(), this.#runner?.stopAll()]);
  }

  async detach(): Promise<void> {
    this.#quiet();
    await this.#connecting;
    await Promise.all([this.#o.supervisor.detach(), this.#runner?.detach()]);
  }

  #quiet(): void {
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
    this.#containerRuns = [];
  }

  /** A key the container supervisor runs: wanted as a container now, or still reported by it (stopping). */
  #isContainer(key: string): boolean {
    return (
      this.#containerRuns.some((r) => r.key === key) ||
      (this.#runner?.statuses().some((s) => s.key === key) ?? false)
    );
  }

  /** `retry`: the timer after a failure (which may fire a little before its time by Date.now()). */
  #connect(retry = false): void {
    if (this.#connecting !== undefined) return;
    const make = this.#o.containers;
    if (make === undefined) {
      this.#failure = {
        reason:
          'the profile has runtime: container, but this agent runs engines as processes only (it was started without a container supervisor): upgrade the agent, or use runtime: process',
        at: Date.now(),
      };
      this.#o.onChange();
      return;
    }
    const retryMs = this.#o.retryMs ?? 30_000;
    if (!retry && this.#failure !== undefined) return;
    this.#failure = undefined;
    this.#o.onChange();
    this.#connecting = make().then(
      (runner) => {
        this.#runner = runner;
        const before = this.#applied;
        this.#o.onContainers?.();
        if (this.#applied === before) runner.apply(this.#containerRuns);
        this.#o.onChange();
      },
      (e: unknown) => {
        this.#failure = { reason: messageOf(e), at: Date.now() };
        this.#o.onChange();
        this.#retry = setTimeout(() => {
          this.#retry = undefined;
          if (this.#containerRuns.length > 0) this.#connect(true);
          // None wanted now: the next container run asks the daemon at once.
          else this.#failure = undefined;
        }, retryMs);
        this.#retry.unref();
      },
    );
    void this.#connecting.finally(() => {
      this.#connecting = undefined;
    });
  }
}

/** The node ports a container shard holds: its published port, else its health check's. */
function runPorts(run: ShardRun): number[] {
  const out: number[] = [];
  if (run.container?.publish !== undefined) out.push(run.container.publish.port);
  if (run.health !== undefined) {
    const port = Number(new URL(run.health.url).port);
    if (port > 0) out.push(port);
  }
  return out;
}
