import type { AttemptContext, EndKind, Ending, Instance, Judged } from '../driver.js';
import { LineSplitter } from '../log-buffer.js';
import { listProcesses, processTree } from '../process/process-tree.js';
import type { Probe } from '../readiness.js';
import type { ExitReport } from '../types.js';
import type { DaemonClient } from './daemon.js';
import { StreamDemuxer } from './demux.js';
import {
  exitSignal,
  followLogs,
  inspectContainer,
  removeContainer,
  stopContainer,
  waitContainer,
} from './operations.js';

/** Lines of output kept with an exit. */
const EXIT_TAIL = 20;
/** How long an exited container's last lines may take to arrive on the log stream. */
const LOG_DRAIN_MS = 2000;

/** What the container driver shares with each of its containers. */
export interface ContainerInstanceContext {
  /** The container is no longer this driver's: the orphan sweep may see it. */
  disown: (id: string) => void;
  now: () => number;
}

/** One shard's container: made by the driver, or an earlier agent's taken over; removed at its end. */
export class ContainerInstance implements Instance {
  readonly noGpuFix =
    "use the image's GPU variant (llama.cpp: a server-cuda tag), or check the NVIDIA Container Toolkit " +
    '(`docker run --rm --gpus all IMAGE nvidia-smi` should list the card)';
  readonly id: string;
  readonly #client: DaemonClient;
  readonly #ctx: ContainerInstanceContext;
  /** Aborted once the attempt is over: the log stream and the wait end. */
  readonly #attempt = new AbortController();
  #a: AttemptContext | undefined;
  #pid: number | undefined;
  #logStart = 0;
  #logsDone: Promise<void> = Promise.resolve();
  #exited: Promise<number | null> | undefined;

  constructor(ctx: ContainerInstanceContext, client: DaemonClient, id: string) {
    this.#ctx = ctx;
    this.#client = client;
    this.id = id;
  }

  get pid(): number | undefined {
    return this.#pid;
  }

  async take(a: AttemptContext, adopted: boolean): Promise<void> {
    this.#a = a;
    this.#logStart = a.log.total;
    this.#logsDone = this.#followLogs(a, adopted);
    try {
      this.#pid = (await inspectContainer(this.#client, this.id))?.pid;
    } catch {
      // The pid is for show; the wait tells whether it runs.
    }
  }

  exited(): Promise<void> {
    const signal = AbortSignal.any([this.#a?.signal ?? this.#attempt.signal, this.#attempt.signal]);
    this.#exited ??= waitContainer(this.#client, this.id, signal).then(
      (code) => code,
      () => new Promise<number | null>(() => undefined),
    );
    return this.#exited.then(() => undefined);
  }

  judge(probe: Probe): Judged {
    return { probe: throughProxy(probe) };
  }

  /** The daemon's `State.Pid` and its descendants are host pids, as the driver reports them. */
  gpuPids(): (() => readonly number[]) | undefined {
    const pid = this.#pid;
    if (pid === undefined || pid <= 0) return undefined;
    return () => processTree(pid, listProcesses());
  }

  ready(): void {
    // The daemon's labels say what runs: nothing to record.
  }

  release(): Promise<void> {
    this.#attempt.abort();
    return Promise.resolve();
  }

  async end(how: EndKind, c: { reason?: string }): Promise<{ ending?: Ending; lastExit?: ExitReport }> {
    const client = this.#client;
    const a = this.#a;
    if (how !== 'exit') {
      try {
        await stopContainer(client, this.id, (a?.run.stopGraceMs ?? 10_000) / 1000);
      } catch {
        // Removal below forces it.
      }
    }
    // The stream ends once the container has stopped: its last lines are in the buffer then.
    await Promise.race([this.#logsDone, new Promise((r) => setTimeout(r, LOG_DRAIN_MS).unref())]);
    this.#attempt.abort();
    const code =
      how === 'exit'
        ? ((await this.#exited) ?? null)
        : ((await inspectContainer(client, this.id).catch(() => undefined))?.exitCode ?? null);
    await removeContainer(client, this.id).catch(() => undefined);
    this.#ctx.disown(this.id);
    if (how === 'stop' || a === undefined) return {};
    const tail = a.log.tail(EXIT_TAIL, this.#logStart);
    const lastExit = {
      code,
      signal: exitSignal(code),
      at: new Date(this.#ctx.now()).toISOString(),
      log_tail: tail,
    };
    const reason = how === 'recycle' ? (c.reason ?? 'recycled') : exitReason(code, tail);
    return { ending: { reason, ran: true }, lastExit };
  }

  /** Reads the container's log stream into the shard's buffer until it ends (the container stopped) or the attempt does. */
  async #followLogs(a: AttemptContext, adopted: boolean): Promise<void> {
    const log = a.log;
    const out = new LineSplitter((line) => log.push(line));
    const err = new LineSplitter((line) => log.push(line));
    const demux = new StreamDemuxer((stream, payload) => (stream === 2 ? err : out).push(payload));
    try {
      // An adopted container's recent lines, for `logs` at once; a new one's from its start.
      const res = await followLogs(this.#client, this.id, {
        signal: this.#attempt.signal,
        ...(adopted ? { tail: 100 } : {}),
      });
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
