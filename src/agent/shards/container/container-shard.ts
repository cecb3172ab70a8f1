import { randomBytes } from 'node:crypto';

import type { DownloadProgress } from '../../../protocol/agent-protocol.js';
import { noGpuMemoryReason, watchGpuMemory } from '../gpu-check.js';
import { LineSplitter, type LogBuffer } from '../log-buffer.js';
import { listProcesses, processTree } from '../process/process-tree.js';
import {
  describeProbe,
  formatMs,
  probeHealth,
  probeTimeout,
  startingReason,
  watchHealth,
  type Probe,
} from '../readiness.js';
import { backoffMs } from '../restart-backoff.js';
import type { ExitReport, GpuProcessReader, ShardRun, ShardState, ShardStatus } from '../types.js';
import { aborted, never, wait } from '../wait.js';
import { DaemonError, type DaemonClient } from './daemon.js';
import { StreamDemuxer } from './demux.js';
import {
  createContainer,
  exitSignal,
  followLogs,
  gpuRuntimeReason,
  inspectContainer,
  removeContainer,
  startContainer,
  stopContainer,
  waitContainer,
} from './operations.js';
import { ensureImage } from './pull.js';
import { ContainerRefusal, containerSpec } from './requests.js';
import type { DaemonKind } from './types.js';

/** The container supervisor's timings, defaults resolved. */
export interface ContainerTiming {
  backoff: { initialMs: number; maxMs: number };
  startingIntervalMs: number;
  readyIntervalMs: number;
  readyTimeoutMs: number;
  settleMs: number;
  stableMs: number;
  /** After a refusal that a person must act on (no NVIDIA runtime, an image that cannot come): the wait before trying again. */
  refusedRetryMs: number;
  gpuCheckDelayMs: number;
  gpuCheckIntervalMs: number;
}

export interface ContainerShardContext {
  client: () => Promise<DaemonClient>;
  node: string;
  log: LogBuffer;
  timing: ContainerTiming;
  onStatus: (status: ShardStatus) => void;
  /**
   * An earlier agent's running container of this key: its id when it runs this very
   * run (same hash), to take over; any other is removed first. Resolves once the node's
   * containers have been surveyed.
   */
  claim: (key: string, hash: string) => Promise<string | undefined>;
  /** The containers this shard owns, so the orphan sweep leaves them alone. */
  own: (id: string) => void;
  disown: (id: string) => void;
  /** Which processes hold memory on each GPU, to tell a container that got no GPU (absent: not checked). */
  gpuProcesses: GpuProcessReader | undefined;
  now: () => number;
}

/** Lines of output kept with an exit. */
const EXIT_TAIL = 20;
/** How long an exited container's last lines may take to arrive on the log stream. */
const LOG_DRAIN_MS = 2000;

interface Ending {
  reason: string;
  /** Wait this long before the next attempt, instead of the backoff; `final`: no next attempt (the run must change). */
  retry?: number | 'final';
  /** A container ran: counts as a restart. */
  ran?: boolean;
}

type Outcome = { kind: 'stop' } | { kind: 'exit'; code: number | null } | { kind: 'recycle'; reason: string };

/**
 * One shard's container, kept running: pull, create, start, wait until ready, watch,
 * and after an exit remove it and start a new one with the agent's backoff (the daemon's
 * restart policy is `no`), until stopped. One loop, so an attempt's container is always
 * gone before the next one is made.
 */
export class ContainerShard {
  #run: ShardRun;
  readonly hash: string;
  readonly #ctx: ContainerShardContext;
  readonly #stopper = new AbortController();
  #done: Promise<void> = Promise.resolve();
  #state: ShardStatus['state'] = 'starting';
  #reason: string | undefined;
  /** While failed with a restart coming by itself: when (ms, the context's clock). */
  #restartAt: number | undefined;
  #download: DownloadProgress | undefined;
  #pid: number | undefined;
  #restarts = 0;
  #failures = 0;
  #readySince: number | undefined;
  #lastExit: ExitReport | undefined;
  #lastEmitted = '';
  #detached = false;
  /** The container of the attempt running now. */
  #id: string | undefined;

  constructor(run: ShardRun, hash: string, ctx: ContainerShardContext) {
    this.#run = run;
    this.hash = hash;
    this.#ctx = ctx;
  }

  get key(): string {
    return this.#run.key;
  }

  /** The container running now, if any. */
  get containerId(): string | undefined {
    return this.#id;
  }

  update(run: ShardRun): void {
    this.#run = run;
  }

  start(after?: Promise<void>): void {
    this.#done = this.#loop(after).catch((e: unknown) => {
      this.#set('failed', `the container supervisor failed: ${e instanceof Error ? e.message : String(e)}`);
    });
  }

  stop(): Promise<void> {
    if (!this.#stopper.signal.aborted) {
      this.#set('stopping', undefined);
      this.#stopper.abort();
    }
    return this.#done;
  }

  /** Stops watching and leaves the container running for the next agent to adopt. */
  detach(): Promise<void> {
    this.#detached = true;
    this.#stopper.abort();
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
    if (this.#download !== undefined && this.#state === 'downloading') s.download = this.#download;
    if (this.#pid !== undefined) s.pid = this.#pid;
    if (this.#readySince !== undefined) s.ready_since = new Date(this.#readySince).toISOString();
    if (this.#lastExit !== undefined) s.last_exit = this.#lastExit;
    return s;
  }

  #stopping(): boolean {
    return this.#stopper.signal.aborted;
  }

  async #loop(after: Promise<void> | undefined): Promise<void> {
    const stop = this.#stopper.signal;
    if (after !== undefined) {
      this.#set('starting', 'waiting for the previous container of this shard to be removed');
      await Promise.race([after, aborted(stop)]);
    }
    if (this.#stopping()) return;
    let adopt = await Promise.race([
      this.#ctx.claim(this.#run.key, this.hash),
      aborted(stop).then(() => undefined),
    ]);
    while (!this.#stopping()) {
      const ending = await this.#attempt(adopt);
      adopt = undefined;
      if (ending === undefined || this.#stopping()) return;
      const now = this.#ctx.now();
      const next = this.#nextAttempt(now);
      this.#failures = next.failures;
      this.#readySince = undefined;
      this.#pid = undefined;
      if (ending.retry === 'final') {
        this.#set('failed', ending.reason);
        return;
      }
      const delay = ending.retry ?? next.delay;
      if (ending.retry === undefined) this.#failures++;
      if (ending.ran === true) this.#restarts++;
      // A refusal is tried again after a while, but waits for someone to act: no restart is coming.
      this.#set(
        'failed',
        `${ending.reason}; ${ending.retry === undefined ? 'restarting' : 'trying again'} in ${formatMs(delay)}`,
        ending.retry === undefined ? now + delay : undefined,
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

  /** One container, from creation (or adoption) to removal. Undefined when it ended because the shard stops. */
  async #attempt(adopted: string | undefined): Promise<Ending | undefined> {
    const run = this.#run;
    const { log } = this.#ctx;
    const stop = this.#stopper.signal;
    let client: DaemonClient;
    try {
      client = await this.#ctx.client();
    } catch (e) {
      return { reason: e instanceof Error ? e.message : String(e) };
    }
    let id: string;
    if (adopted !== undefined) {
      id = adopted;
      this.#id = id;
      this.#ctx.own(id);
      this.#set('starting', 'adopted from the previous agent: checking its health');
    } else {
      const made = await this.#create(client);
      if (made === undefined) return undefined;
      if ('reason' in made) return made;
      id = made.id;
    }
    const logStart = log.total;
    const attempt = new AbortController();
    const signal = AbortSignal.any([stop, attempt.signal]);
    const logsDone = this.#followLogs(client, id, adopted !== undefined, attempt.signal);
    try {
      this.#pid = (await inspectContainer(client, id))?.pid;
    } catch {
      // The pid is for show; the wait below tells whether it runs.
    }
    this.#emit();

    const outcome = await Promise.race<Outcome>([
      aborted(signal).then(() => ({ kind: 'stop' as const })),
      waitContainer(client, id, signal).then(
        (code) => ({ kind: 'exit' as const, code }),
        () => new Promise<Outcome>(() => undefined),
      ),
      this.#watch(signal, adopted !== undefined).then((reason) => ({ kind: 'recycle' as const, reason })),
    ]);
    if (outcome.kind === 'stop' && this.#detached) {
      attempt.abort();
      this.#id = undefined;
      return undefined;
    }
    // Stopped first, then the backoff: it starts again no sooner than this.
    if (outcome.kind === 'recycle') {
      const now = this.#ctx.now();
      this.#set('failed', outcome.reason, now + this.#nextAttempt(now).delay);
    }
    if (outcome.kind !== 'exit') {
      try {
        await stopContainer(client, id, run.stopGraceMs / 1000);
      } catch {
        // Removal below forces it.
      }
    }
    // The stream ends once the container has stopped: its last lines are in the buffer then.
    await Promise.race([logsDone, new Promise((r) => setTimeout(r, LOG_DRAIN_MS).unref())]);
    attempt.abort();
    let code: number | null = null;
    if (outcome.kind === 'exit') code = outcome.code;
    else code = (await inspectContainer(client, id).catch(() => undefined))?.exitCode ?? null;
    await removeContainer(client, id).catch(() => undefined);
    this.#ctx.disown(id);
    this.#id = undefined;
    if (outcome.kind === 'stop') return undefined;
    const tail = log.tail(EXIT_TAIL, logStart);
    this.#lastExit = {
      code,
      signal: exitSignal(code),
      at: new Date(this.#ctx.now()).toISOString(),
      log_tail: tail,
    };
    if (outcome.kind === 'recycle') return { reason: outcome.reason, ran: true };
    return { reason: exitReason(code, tail), ran: true };
  }

  /** Image, create, start; an Ending when it did not come to a running container. */
  async #create(client: DaemonClient): Promise<{ id: string } | Ending | undefined> {
    const run = this.#run;
    const stop = this.#stopper.signal;
    let spec;
    try {
      spec = containerSpec(run, { node: this.#ctx.node, attempt: randomBytes(3).toString('hex') });
    } catch (e) {
      if (e instanceof ContainerRefusal) return { reason: e.message, retry: 'final' };
      throw e;
    }
    const container = spec.container;
    try {
      this.#set('starting', `looking for image ${container.image}`);
      await ensureImage(client, container, {
        signal: stop,
        onProgress: (p) => {
          this.#download = p;
          this.#set('downloading', `pulling image ${container.image}`);
        },
        onNote: (text) => {
          this.#ctx.log.push(`[llmgw] ${text}`);
        },
      });
    } catch (e) {
      if (this.#stopping()) return undefined;
      if (e instanceof ContainerRefusal) return { reason: e.message, retry: this.#ctx.timing.refusedRetryMs };
      return { reason: `cannot get image ${container.image}: ${e instanceof Error ? e.message : String(e)}` };
    }
    this.#download = undefined;
    if (this.#stopping()) return undefined;
    this.#set('starting', 'starting the container');
    let id: string;
    try {
      id = await createContainer(client, spec);
    } catch (e) {
      if (e instanceof ContainerRefusal) return { reason: e.message, retry: 'final' };
      return daemonFailure('cannot create the container', e, client.kind, this.#ctx.timing.refusedRetryMs);
    }
    this.#id = id;
    this.#ctx.own(id);
    try {
      await startContainer(client, id);
    } catch (e) {
      await removeContainer(client, id).catch(() => undefined);
      this.#ctx.disown(id);
      this.#id = undefined;
      return daemonFailure('cannot start the container', e, client.kind, this.#ctx.timing.refusedRetryMs);
    }
    // Stopped meanwhile: the attempt's stop path removes it.
    return { id };
  }

  /** Reads the container's log stream into the shard's buffer until it ends (the container stopped) or `signal`. */
  async #followLogs(client: DaemonClient, id: string, adopted: boolean, signal: AbortSignal): Promise<void> {
    const log = this.#ctx.log;
    const out = new LineSplitter((line) => log.push(line));
    const err = new LineSplitter((line) => log.push(line));
    const demux = new StreamDemuxer((stream, payload) => (stream === 2 ? err : out).push(payload));
    try {
      // An adopted container's recent lines, for `logs` at once; a new one's from its start.
      const res = await followLogs(client, id, { signal, ...(adopted ? { tail: 100 } : {}) });
      await new Promise<void>((resolve) => {
        res.on('data', (c: Buffer) => demux.push(c));
        res.on('end', resolve);
        res.on('error', () => resolve());
        res.on('close', resolve);
      });
    } catch {
      // A stream that breaks loses lines, not the engine.
    }
    out.flush();
    err.flush();
  }

  /** Readiness, then health while ready; resolves with a reason to recycle the container. */
  async #watch(signal: AbortSignal, adopted: boolean): Promise<string> {
    const { timing, now } = this.#ctx;
    const health = this.#run.health;
    const deadline = now() + timing.readyTimeoutMs;
    if (health === undefined) {
      if (!adopted && !(await wait(timing.settleMs, signal))) return never();
    } else {
      for (;;) {
        const probe = throughProxy(await probeHealth(health, probeTimeout(timing.startingIntervalMs)));
        if (signal.aborted) return never();
        if (probe.kind === 'ok') break;
        if (now() >= deadline)
          return `not ready after ${formatMs(timing.readyTimeoutMs)} (last health check: ${describeProbe(probe, health)}); raise the ready timeout if the model loads slower than that`;
        this.#set('starting', startingReason(probe, health));
        if (!(await wait(timing.startingIntervalMs, signal))) return never();
      }
    }
    this.#readySince = now();
    const degraded = this.#run.degradedReason;
    if (degraded !== undefined) this.#set('degraded', degraded);
    else this.#set('ready', undefined);
    if (degraded === undefined) this.#watchGpu(signal);
    return health === undefined ? never() : watchHealth(health, this.#ctx.timing.readyIntervalMs, signal);
  }

  /**
   * A container the runtime gave no GPU (a CPU image, a toolkit that did not pass the
   * devices) may serve from the CPU: degraded until its processes hold memory on its GPUs.
   * The daemon's `State.Pid` and its descendants are host pids, as the driver reports them.
   */
  #watchGpu(signal: AbortSignal): void {
    const uuids = this.#run.gpu?.uuids ?? [];
    const reader = this.#ctx.gpuProcesses;
    const pid = this.#pid;
    if (uuids.length === 0 || reader === undefined || pid === undefined || pid <= 0) return;
    const { timing } = this.#ctx;
    void watchGpuMemory({
      uuids,
      reader,
      pids: () => processTree(pid, listProcesses()),
      delayMs: timing.gpuCheckDelayMs,
      intervalMs: timing.gpuCheckIntervalMs,
      signal,
      onCheck: (holds) => {
        if (holds) this.#set('ready', undefined);
        else this.#set('degraded', noGpuMemoryReason(uuids, 'container'));
      },
    });
  }

  /** `restartAt`: failed, and this loop starts it again then by itself. */
  #set(state: ShardState | 'downloading', reason: string | undefined, restartAt?: number): void {
    if (this.#stopping() && state !== 'stopping') return;
    this.#state = state;
    this.#reason = reason;
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

/** A daemon's refusal to create or start: a missing GPU runtime waits long (a person must act), others back off. */
function daemonFailure(what: string, e: unknown, kind: DaemonKind, refusedRetryMs: number): Ending {
  const message = e instanceof Error ? e.message : String(e);
  const gpu = gpuRuntimeReason(message, kind);
  if (gpu !== undefined) return { reason: gpu, retry: refusedRetryMs };
  return { reason: `${what}: ${e instanceof DaemonError ? `the daemon says: ${message}` : message}` };
}

/**
 * A published port answers through the daemon's proxy (docker-proxy, rootlessport), which
 * accepts the connection and then drops it while nothing listens in the container: that
 * is the engine refusing connections, as it would be on the host.
 */
function throughProxy(probe: Probe): Probe {
  if (probe.kind === 'error' && /^(ECONNRESET|EPIPE|socket hang up)$/.test(probe.message))
    return { kind: 'refused' };
  return probe;
}

/** `the container exited with code 1; its last error line: …`. */
export function exitReason(code: number | null, lines: readonly string[]): string {
  const signal = exitSignal(code);
  let reason =
    code === null
      ? 'the container went away (removed outside the agent?)'
      : signal !== null
        ? `the container was killed by ${signal} (exit code ${code})`
        : `the container exited with code ${code}`;
  if (signal === 'SIGKILL') reason += ' (`docker kill`, or the out-of-memory killer: `dmesg` tells)';
  const error = lines.findLast((line) => /error/i.test(line));
  if (error !== undefined) reason += `; its last error line: ${error.trim().slice(0, 300)}`;
  return reason;
}
