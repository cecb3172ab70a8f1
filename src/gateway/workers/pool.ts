import { fork, type ChildProcess } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getSystemErrorName } from 'node:util';

import type { Logger } from 'pino';

import { GatewayError } from '../openai-errors.js';
import { RateLimits } from '../rate-limits.js';
import type { RouteTable } from '../../protocol/routes.js';
import type { WakeAnswer } from '../../protocol/load-report.js';
import type { ServingCertificate, SharedListener } from '../../http1/http-server.js';

import type { GatewayCounts } from '../../protocol/traffic-views.js';

import { BreakerBoard } from './breaker-board.js';
import { sumCounts } from './counts.js';
import { InFlightLedger } from './ledger.js';
import { PeerSums } from './peer-sums.js';
import { serverHandleFactory, type TcpHandle } from './server-handle.js';
import type { Call, ToPrimary, ToWorker, WireError, WorkerInit } from './messages.js';
import { aggregateMetrics, type MetricJson } from './metrics.js';
import type { PrimaryServices } from './primary-services.js';

export interface WorkerPoolOptions {
  count: number;
  gateway: WorkerInit['gateway'];
  maxConnectionsPerClient: number;
  logger: Logger;
  /** How often the route table is read for the workers (pushed only when it changed). */
  routesMs?: number;
  keyTtlMs?: number;
  /** A worker's requests may finish for this long when it stops. */
  graceMs?: number;
  /** The worker process's entry: a module that calls runWorker (./worker.ts) with its logger. */
  entry: string;
}

interface Slot {
  index: number;
  child: ChildProcess | undefined;
  /** Restarts in a row without a long enough life; the next waits longer. */
  failures: number;
  startedAt: number;
  timer: NodeJS.Timeout | undefined;
}

/** A worker that lived this long before it died is restarted at once; sooner, after a backoff. */
const healthyLifeMs = 30_000;
const backoffMs = (failures: number) => Math.min(10_000, 100 * 2 ** Math.max(0, failures - 1));

/** The error of listening on host:port now, if any. */
function listenError(host: string | undefined, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', (e: NodeJS.ErrnoException) => resolve(e));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/**
 * Binds an address without listening on it here: the workers listen and accept, this process
 * never does (the handle is never polled), and keeps it for workers started later. The
 * cluster module does the same for its shared handles.
 */
async function bindHandle(host: string | undefined, port: number): Promise<TcpHandle> {
  const create = serverHandleFactory(net, process.version);
  const tries: [string, number][] = [];
  if (host === undefined || host === '') tries.push(['::', 6], ['0.0.0.0', 4]);
  else if (net.isIP(host) !== 0) tries.push([host, net.isIP(host)]);
  else {
    const found = await lookup(host);
    tries.push([found.address, found.family]);
  }
  let last = 0;
  // The workers of a process just killed let go of the address as they see it gone: a
  // restart on the same port waits a moment for them rather than fail.
  for (let attempt = 0; attempt < 10; attempt++) {
    // A bound handle listened on in another process does not refuse a second one on Linux
    // (both then accept): whether another process listens is asked first, by listening here
    // for a moment (the port is then free again at once: nothing was accepted).
    const taken = port === 0 ? undefined : await listenError(host, port);
    if (taken === undefined) {
      for (const [address, type] of tries) {
        const handle = create(address, port, type);
        if (typeof handle !== 'number') return handle;
        last = handle;
      }
    } else if (taken.code !== 'EADDRINUSE') throw taken;
    else last = -98;
    if (port === 0 || getSystemErrorName(last) !== 'EADDRINUSE') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const code = getSystemErrorName(last);
  const e = new Error(`bind ${code} ${host ?? ''}:${port}`) as NodeJS.ErrnoException;
  e.code = code;
  throw e;
}

/**
 * The gateway's worker processes (gateway.workers), as the primary (the control plane, or
 * `llmgw gateway`) runs them: it binds the public address and hands it to each, answers
 * their keys and limited keys' counts, pushes routes and certificates, tells each the
 * others' requests per replica, takes their usage, sums their metrics, and restarts one that
 * dies. See docs/gateway-workers.md.
 */
export class WorkerPool implements SharedListener {
  readonly relayPath: string;
  /** Every key's rpm and tpm, for all workers and the primary's own gateway. */
  readonly limits = new RateLimits();
  readonly #o: WorkerPoolOptions;
  readonly #dir: string;
  readonly #slots: Slot[] = [];
  readonly #ledger: InFlightLedger;
  /** Each replica's one breaker for every process. */
  readonly #board: BreakerBoard;
  /** Each worker's connections per client address: max_connections_per_client holds for them all. */
  readonly #clients = new PeerSums((member, sums) =>
    this.#slots[Number(member)]?.child?.send({ t: 'peer-connections', counts: sums } satisfies ToWorker),
  );
  readonly #collecting = new Map<number, (m: MetricJson[]) => void>();
  #handle: TcpHandle | undefined;
  #tls: ServingCertificate | undefined;
  #routes: RouteTable = { replicas: [], models: [] };
  #routesText = '';
  #routesTimer: NodeJS.Timeout | undefined;
  #services: PrimaryServices | undefined;
  #attached: Promise<PrimaryServices>;
  #attach: (s: PrimaryServices) => void = () => undefined;
  #stopping = false;
  #nextCollect = 1;
  /** Each worker's last request counters; a worker's that exited are kept in #retired (counters never go back). */
  readonly #counts = new Map<number, GatewayCounts>();
  #retired: GatewayCounts = new Map();
  /** Usage being written: waited for on close, before the store closes. */
  readonly #writing = new Set<Promise<void>>();

  constructor(options: WorkerPoolOptions) {
    this.#o = options;
    // A directory only this user reads (mkdtemp makes it 0700); the socket in it is 0600 too.
    this.#dir = mkdtempSync(join(tmpdir(), 'llmgw-gw-'));
    this.relayPath = join(this.#dir, 'relay.sock');
    this.#attached = new Promise((resolve) => {
      this.#attach = resolve;
    });
    this.#ledger = new InFlightLedger((member, peers) => {
      if (member === 'primary') this.#services?.local.setPeerInFlight(peers);
      else
        this.#slots[Number(member)]?.child?.send({ t: 'peers', counts: new Map(peers) } satisfies ToWorker);
    });
    this.#board = new BreakerBoard((states) => {
      this.#services?.local.adoptBreakers(states);
      for (const s of this.#slots) s.child?.send({ t: 'breakers', states } satisfies ToWorker);
    });
  }

  get count(): number {
    return this.#o.count;
  }

  /** The request counters of every worker (up to a second old), and of those that exited. */
  counts(): GatewayCounts {
    return sumCounts([this.#retired, ...this.#counts.values()]);
  }

  /** The pids of the workers running now. */
  pids(): number[] {
    return this.#slots.flatMap((s) => (s.child?.pid === undefined ? [] : [s.child.pid]));
  }

  async open(host: string | undefined, port: number, tls: ServingCertificate | undefined): Promise<number> {
    chmodSync(this.relayPath, 0o600);
    this.#tls = tls;
    this.#handle = await bindHandle(host, port);
    const out: { port?: number } = {};
    this.#handle.getsockname(out);
    await Promise.all(
      Array.from({ length: this.#o.count }, (_, index) => {
        const slot: Slot = { index, child: undefined, failures: 0, startedAt: 0, timer: undefined };
        this.#slots.push(slot);
        return this.#start(slot, true);
      }),
    );
    return out.port ?? port;
  }

  /** The primary's gateway parts, once started: workers' calls wait for them until then. */
  attach(services: PrimaryServices): void {
    this.#services = services;
    this.#attach(services);
    services.local.onInFlightChange(() => this.#ledger.post('primary', services.local.ownInFlight()));
    services.local.onBreakerEvidence((replica, e) => this.#board.evidence(replica, e));
    const read = async () => {
      try {
        const table = await services.routes.routeTable();
        const text = JSON.stringify(table);
        if (text === this.#routesText) return;
        this.#routes = table;
        this.#routesText = text;
        this.#board.setReplicas(table.replicas);
        for (const s of this.#slots) s.child?.send({ t: 'routes', routes: table } satisfies ToWorker);
      } catch (e) {
        this.#o.logger.warn(
          { err: e instanceof Error ? e.message : String(e) },
          'routes not read for the gateway workers',
        );
      }
    };
    void read();
    this.#routesTimer = setInterval(() => void read(), this.#o.routesMs ?? 500);
    this.#routesTimer.unref();
  }

  setCertificate(tls: ServingCertificate): void {
    this.#tls = tls;
    for (const s of this.#slots) s.child?.send({ t: 'cert', tls } satisfies ToWorker);
  }

  /** Every worker stops accepting, finishes its requests (up to the grace) and exits; then the address is let go. */
  async close(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    if (this.#routesTimer !== undefined) clearInterval(this.#routesTimer);
    const graceMs = this.#o.graceMs ?? 10_000;
    await Promise.all(
      this.#slots.map(async (slot) => {
        if (slot.timer !== undefined) clearTimeout(slot.timer);
        const child = slot.child;
        if (child === undefined || child.exitCode !== null || child.signalCode !== null || !child.connected)
          return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.send({ t: 'stop', graceMs } satisfies ToWorker);
        const kill = setTimeout(() => child.kill('SIGKILL'), graceMs + 5000);
        await exited;
        clearTimeout(kill);
      }),
    );
    this.#handle?.close();
    this.#handle = undefined;
    await Promise.allSettled([...this.#writing]);
    rmSync(this.#dir, { recursive: true, force: true });
  }

  /** Starts a worker in `slot`; `first`: during open(), when a worker that cannot listen fails the start instead of being started again. */
  #start(slot: Slot, first = false): Promise<void> {
    const child = fork(this.#o.entry, [], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    slot.child = child;
    slot.startedAt = Date.now();
    const init: WorkerInit = {
      t: 'init',
      slot: slot.index,
      gateway: this.#o.gateway,
      maxConnectionsPerClient: this.#o.maxConnectionsPerClient,
      relayPath: this.relayPath,
      tls: this.#tls,
      routes: this.#routes,
      keyTtlMs: this.#o.keyTtlMs ?? 1000,
      breakers: this.#board.snapshots(),
    };
    const member = String(slot.index);
    // A worker gone before a send reaches it (EPIPE) is handled by its exit.
    child.on('error', (e) =>
      this.#o.logger.warn({ worker: slot.index, err: e.message }, 'gateway worker channel'),
    );
    let failure: NodeJS.ErrnoException | undefined;
    return new Promise<void>((resolve, reject) => {
      child.on('message', (m: ToPrimary) => {
        if (m.t === 'listening') {
          this.#clients.join(member);
          resolve();
        } else if (m.t === 'failed') {
          failure = new Error(m.message);
          if (m.code !== undefined) failure.code = m.code;
        } else if (m.t === 'counts') this.#counts.set(slot.index, m.counts);
        else this.#message(child, member, m);
      });
      child.once('exit', (code, signal) => {
        reject(
          failure ??
            new Error(
              `gateway worker ${slot.index} exited (${signal ?? `code ${code ?? '?'}`}) before it listened`,
            ),
        );
        this.#gone(slot, child);
        // A worker that cannot listen fails the first start rather than be started again.
        if (this.#stopping || (first && failure !== undefined)) return;
        this.#restart(slot, { pid: child.pid, code, signal });
      });
      child.send(init, this.#handle as unknown as net.Server);
    });
  }

  /** A worker exited: it leaves the ledger and the connection sums; its counters are kept. */
  #gone(slot: Slot, child: ChildProcess): void {
    const member = String(slot.index);
    this.#ledger.remove(member);
    this.#clients.remove(member);
    const last = this.#counts.get(slot.index);
    if (last !== undefined) this.#retired = sumCounts([this.#retired, last]);
    this.#counts.delete(slot.index);
    if (slot.child === child) slot.child = undefined;
  }

  /** Starts a slot's worker again: at once after a long enough life, else after a growing backoff. */
  #restart(
    slot: Slot,
    exit: { pid: number | undefined; code: number | null; signal: NodeJS.Signals | null },
  ): void {
    const lived = Date.now() - slot.startedAt;
    slot.failures = lived >= healthyLifeMs ? 0 : slot.failures + 1;
    const wait = slot.failures === 0 ? 0 : backoffMs(slot.failures);
    this.#o.logger.error(
      { worker: slot.index, ...exit, restartInMs: wait },
      'a gateway worker exited; it is started again',
    );
    slot.timer = setTimeout(() => {
      slot.timer = undefined;
      if (!this.#stopping) this.#start(slot).catch(() => undefined);
    }, wait);
  }

  #message(child: ChildProcess, member: string, m: ToPrimary): void {
    switch (m.t) {
      case 'call':
        void this.#answer(m.call).then(
          (value) => child.connected && child.send({ t: 'reply', id: m.id, value } satisfies ToWorker),
          (e: unknown) =>
            child.connected && child.send({ t: 'reply', id: m.id, error: wireError(e) } satisfies ToWorker),
        );
        break;
      case 'charge':
        this.limits.charge(m.key, m.tokens, { tpm: m.tpm });
        break;
      case 'inflight':
        this.#ledger.post(member, m.counts);
        break;
      case 'breaker':
        this.#board.evidence(m.replica, m.evidence);
        break;
      case 'connections':
        this.#clients.post(member, m.counts);
        break;
      case 'report':
        void this.#attached
          .then((s) => s.signals?.report(m.report))
          .catch((e: unknown) =>
            this.#o.logger.warn(
              { err: e instanceof Error ? e.message : String(e) },
              'a gateway worker’s load report was not passed on',
            ),
          );
        break;
      case 'collected':
        this.#collecting.get(m.id)?.(m.metrics as MetricJson[]);
        break;
      case 'listening':
      case 'failed':
      case 'counts':
        break;
    }
  }

  async #answer(call: Call): Promise<unknown> {
    switch (call.method) {
      case 'key': {
        const s = await this.#attached;
        return s.keys.check(call.secret === '' ? undefined : call.secret);
      }
      case 'admit':
        return this.limits.admit(call.key, { rpm: call.rpm, tpm: call.tpm });
      case 'metrics':
        return this.#metrics();
      case 'wake': {
        const s = await this.#attached;
        if (s.signals === undefined)
          return {
            ok: false,
            reason: 'this gateway has no autoscaler to wake the model',
          } satisfies WakeAnswer;
        return s.signals.wake(call.model);
      }
      case 'usage': {
        const s = await this.#attached;
        const writing = s.usage.write(call.rows);
        this.#writing.add(writing);
        try {
          await writing;
        } finally {
          this.#writing.delete(writing);
        }
        return undefined;
      }
    }
  }

  /** Every worker's metrics and the primary gateway's, summed as one gateway's. */
  async #metrics(): Promise<{ contentType: string; text: string }> {
    const s = await this.#attached;
    const parts = await Promise.all([
      s.local.metricsJson(),
      ...this.#slots.map((slot) => this.#collect(slot.child)),
    ]);
    return aggregateMetrics(parts, this.#board.states());
  }

  #collect(child: ChildProcess | undefined): Promise<MetricJson[]> {
    if (child === undefined || !child.connected) return Promise.resolve([]);
    const id = this.#nextCollect++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done([]), 2000);
      const done = (m: MetricJson[]) => {
        clearTimeout(timer);
        this.#collecting.delete(id);
        resolve(m);
      };
      this.#collecting.set(id, done);
      child.send({ t: 'collect', id } satisfies ToWorker);
    });
  }
}

function wireError(e: unknown): WireError {
  if (e instanceof GatewayError) return { code: e.code, message: e.message, retryAfterS: e.retryAfterS };
  return {
    code: 'no_ready_replica',
    message: `the gateway could not check this request: ${e instanceof Error ? e.message : String(e)}; retry in a moment`,
    retryAfterS: 5,
  };
}
