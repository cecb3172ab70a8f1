import { join } from 'node:path';

import type { Logger } from 'pino';

import { messageOf } from '../core/errors.js';
import { engineFor } from '../engines/registry.js';
import { isContainerProfile, type EngineName } from '../catalog/model-spec.js';
import type { ContainersSettings } from '../config/schema.js';
import type { EngineSettings, ShardLaunch, Weights } from '../engines/types.js';
import { devicesOf } from '../gpu/devices.js';
import type { Device, NodeInventory } from '../gpu/types.js';
import type { Origin } from '../models/origin.js';
import type {
  AgentMessage,
  AssignedShard,
  DownloadProgress,
  EngineSettingsWire,
  ServerMessage,
  ShardStatusWire,
} from '../protocol/agent-protocol.js';

import { AdoptionGrace } from './adoption-grace.js';
import { containerRun } from './container-run.js';
import { engineBin } from './engine-bin.js';
import type { EngineRunner } from './engine-runners.js';
import type { InstalledLlama, LlamaInstallOptions } from './installer/index.js';
import { LlamaInstalls, type LlamaChoice } from './llama-install.js';
import { LogRelay } from './log-relay.js';
import { PortsReport } from './ports-report.js';
import { SavedAssignment, type Assign } from './saved-assignment.js';
import { ShardReport } from './shard-report.js';
import type { GpuRequestKind } from './shards/container/types.js';
import { fetchedWeights, weightsOf } from './shard-weights.js';
import type { ShardRun } from './shards/types.js';
import { AgentWeights, type AgentWeightsOptions } from './weights.js';

export interface ShardExecutorOptions {
  dataDir: string;
  logger: Logger;
  /** The process supervisor, or the composite that also runs container profiles (engine-runners.ts). */
  supervisor: EngineRunner;
  /** Engine binaries this node's own settings name, by engine; they win over the control plane's. */
  localBins: Readonly<Record<string, string | undefined>>;
  /** The node's inventory as last read. */
  inventory: () => NodeInventory | undefined;
  /** Sends to the control plane; false while disconnected (the state is sent again on reconnect). */
  send: (m: AgentMessage) => boolean;
  /**
   * Where engines listen, asked as each starts: loopback when the control plane (and so the
   * gateway) is on this machine, or when the node's engine proxy serves them to other machines.
   */
  bindHost: string | (() => string);
  install?: (o: LlamaInstallOptions) => Promise<InstalledLlama>;
  /** How often the ports other programs listen on are looked at again (default 5 s). */
  portsIntervalMs?: number;
  /** The control plane and this node's credential: where the mirror is, and its key. */
  controlPlane?: () => { url: string; credential?: string | undefined; nodeId?: string | undefined };
  /** The model cache: agent.models.max_gb (in bytes), and knobs of the fetcher for tests. */
  models?: Pick<AgentWeightsOptions, 'maxBytes' | 'fetcher' | 'retry' | 'reportMs'>;
  /**
   * How long engines an earlier agent left running, and the last saved assignment does not
   * place here, are kept while no control plane has said what this node runs (default 60 s).
   */
  adoptGraceMs?: number;
  /**
   * Profiles with `runtime: container`: this node's `agent.containers` settings, and how GPUs
   * reach its daemon's containers (`gpus: auto` resolved once the daemon answered; nvidia until then).
   */
  containers?: {
    settings: ContainersSettings;
    gpuRequest?: () => GpuRequestKind;
    /** The `llmgw.node` label: this node's id, the same across agent restarts (for adoption). */
    nodeId?: () => string | undefined;
  };
}

/** A shard waiting for its model's files, reported with the download's progress as it goes. */
interface Waiting {
  key: string;
  replica: string;
  rank: number;
  origin: Origin;
}

/**
 * The agent's side of placement: turns what the control plane assigns this node into runs
 * of its shards (the specs of the process or container driver, once their model files and
 * any engine the agent installs are here) and hands them to the supervisor. What goes
 * around it has a module each: the saved assignment, the adoption grace, the llama.cpp
 * install, the model files (weights.ts), the report, the ports taken and the logs relay.
 */
export class ShardExecutor {
  readonly #o: ShardExecutorOptions;
  #desired: Assign | undefined;
  /** Shards that could not be turned into runs: a missing model, an install that failed. */
  readonly #blocked = new Map<string, ShardStatusWire>();
  /** Shards whose engine waits for its model's files. */
  readonly #waiting = new Map<string, Waiting>();
  readonly #weights: AgentWeights;
  readonly #llama: LlamaInstalls;
  readonly #logs: LogRelay;
  readonly #ports: PortsReport;
  readonly #adoption: AdoptionGrace;
  readonly #saved: SavedAssignment;
  readonly #report: ShardReport;

  constructor(options: ShardExecutorOptions) {
    this.#o = options;
    this.#saved = new SavedAssignment(options.dataDir);
    this.#weights = new AgentWeights({
      ...options.models,
      dataDir: options.dataDir,
      logger: options.logger,
      controlPlane: options.controlPlane ?? (() => ({ url: 'http://127.0.0.1:8080' })),
      send: options.send,
      assigned: () =>
        (this.#desired?.shards ?? []).flatMap((s) =>
          s.origin === undefined || s.origin.kind === 'path'
            ? []
            : [{ model: s.model.name, origin: s.origin }],
        ),
      onProgress: () => this.report(),
      onSettled: () => this.#sync(),
    });
    this.#llama = new LlamaInstalls({
      dataDir: options.dataDir,
      logger: options.logger,
      localBin: options.localBins['llamacpp'],
      inventory: options.inventory,
      install: options.install,
      onProgress: () => this.report(),
      onSettled: () => this.#sync(),
    });
    this.#logs = new LogRelay({
      runner: options.supervisor,
      send: options.send,
      blocked: (key) => this.#blocked.get(key),
      nodeName: () => this.#nodeName(),
    });
    this.#ports = new PortsReport({
      runner: options.supervisor,
      logger: options.logger,
      range: () => this.#desired?.ports,
      onChange: () => this.report(),
      intervalMs: options.portsIntervalMs,
    });
    this.#report = new ShardReport({
      runner: options.supervisor,
      send: options.send,
      pending: () => [
        ...this.#blocked.values(),
        ...[...this.#waiting.values()].map((w) => this.#waitingStatus(w)),
      ],
      ports: this.#ports,
      engines: () => this.#llama.report(),
    });
    this.#adoption = new AdoptionGrace({
      runner: options.supervisor,
      logger: options.logger,
      graceMs: options.adoptGraceMs,
    });
  }

  /** The node's model files: fetched, reported, bounded, purged. */
  get weights(): AgentWeights {
    return this.#weights;
  }

  /** Builds the runs again from the assignment held (after the container daemon answered, say). */
  resync(): void {
    this.#sync();
  }

  get assignmentFile(): string {
    return this.#saved.file;
  }

  /**
   * Starts what the last saved assignment said, before the control plane is reached: the
   * engines an earlier agent left running for it are taken over, not started again.
   */
  resume(): void {
    // Unassigned ones are stopped once a control plane says what runs here, or after the grace without one.
    this.#adoption.start(() => new Set((this.#desired?.shards ?? []).map((s) => `${s.replica}/${s.rank}`)));
    try {
      const saved = this.#saved.read();
      if (saved === undefined) return;
      this.#o.logger.info({ shards: saved.shards.length }, 'resuming the last assignment');
      this.#desired = saved;
      this.#weights.configure(saved.weights);
      this.#sync();
    } catch (e) {
      this.#o.logger.warn(
        { err: messageOf(e) },
        'could not read the last assignment; waiting for the control plane',
      );
    }
  }

  handle(m: Exclude<ServerMessage, { type: 'welcome' }>): void {
    if (m.type === 'assign') {
      this.#desired = m;
      this.#saved.write(m);
      this.#weights.configure(m.weights);
      this.#sync();
      this.#adoption.assigned(new Set(m.shards.map((s) => `${s.replica}/${s.rank}`)));
      this.#ports.watch();
      void this.#weights.evict();
    } else if (m.type === 'pull') this.#weights.pull(m.model, m.origin);
    else if (m.type === 'cache_list') void this.#weights.cacheList(m.request);
    else if (m.type === 'purge') void this.#weights.purge(m.model, m.origins);
    else if (m.type === 'logs') this.#logs.handle(m);
    else this.#logs.cancel(m.request);
  }

  /** Sends every shard's state (after a reconnection, and after any change). */
  report(): void {
    this.#report.schedule();
  }

  async stop(): Promise<void> {
    const quiet = this.#quiet();
    await Promise.all([this.#o.supervisor.stopAll(), quiet]);
  }

  /** Stops, leaving the engines running for the next agent to adopt (an agent restart, an upgrade). */
  async detach(): Promise<void> {
    const quiet = this.#quiet();
    await Promise.all([this.#o.supervisor.detach(), quiet]);
  }

  #quiet(): Promise<void> {
    this.#logs.close();
    this.#ports.close();
    this.#adoption.close();
    return this.#weights.stop();
  }

  #sync(): void {
    try {
      this.#syncNow();
    } catch (e) {
      // Whatever went wrong with one assignment must not take the agent, and every engine, down.
      this.#o.logger.error({ err: messageOf(e) }, 'could not apply the assignment');
    }
  }

  #syncNow(): void {
    const desired = this.#desired;
    if (desired === undefined) return;
    const inventory = this.#o.inventory();
    const { devices } =
      inventory === undefined ? { devices: [] as Device[] } : devicesOf(inventory.gpu.cards);
    this.#blocked.clear();
    this.#waiting.clear();
    const runs: ShardRun[] = [];
    // Containers bring their own engine: only process shards need one the agent installs.
    const llama = this.#llama.choose(
      desired.engines,
      inventory,
      desired.shards.some((s) => {
        const p = profileOf(s);
        return engineFor(p.engine).installedByAgent && !isContainerProfile(p);
      }),
    );
    const origins = new Map<string, Origin>();
    for (const shard of desired.shards) {
      const key = `${shard.replica}/${shard.rank}`;
      try {
        const run = this.#run(shard, desired.engines, devices, llama);
        if ('downloading' in run && shard.origin !== undefined)
          this.#waiting.set(key, { key, replica: shard.replica, rank: shard.rank, origin: shard.origin });
        else if ('waiting' in run)
          this.#blocked.set(key, {
            key,
            replica: shard.replica,
            rank: shard.rank,
            state: 'starting',
            reason: run.waiting,
            restarts: 0,
          });
        else if ('processes' in run) {
          runs.push(run);
          if (shard.origin !== undefined) origins.set(key, shard.origin);
        }
      } catch (e) {
        this.#blocked.set(key, {
          key,
          replica: shard.replica,
          rank: shard.rank,
          state: 'failed',
          reason: messageOf(e),
          restarts: 0,
        });
      }
    }
    const running = new Set(this.#o.supervisor.statuses().map((s) => s.key));
    this.#o.supervisor.apply(runs);
    // An engine starting on fetched files: they are the cache's most recently used.
    for (const run of runs) {
      const origin = origins.get(run.key);
      const shard = desired.shards.find((s) => `${s.replica}/${s.rank}` === run.key);
      if (!running.has(run.key) && origin !== undefined && origin.kind !== 'path' && shard !== undefined)
        this.#weights.markUsed(origin, shard.model.name);
    }
    this.report();
  }

  /** A shard waiting for its files, with how far their download is now. */
  #waitingStatus(w: Waiting): ShardStatusWire {
    const need = this.#weights.status(w.origin);
    const base = { key: w.key, replica: w.replica, rank: w.rank, restarts: 0 };
    if (need === undefined || 'ready' in need)
      return { ...base, state: 'starting', reason: 'its model files are here; starting its engine' };
    if ('failed' in need) return { ...base, state: 'failed', reason: need.failed };
    return { ...base, state: 'downloading', reason: need.reason, download: need.downloading };
  }

  #run(
    shard: AssignedShard,
    engines: EngineSettingsWire,
    nodeDevices: readonly Device[],
    llama: LlamaChoice,
  ): ShardRun | { waiting: string } | { downloading: DownloadProgress } {
    const profile = profileOf(shard);
    const engine = engineFor(profile.engine);
    const devices = shard.devices.map((id) => {
      const d = nodeDevices.find((x) => x.id === id);
      if (d === undefined)
        throw new Error(
          `device ${id} was placed here but this node does not have it now (its cards or MIG layout changed)`,
        );
      return d;
    });
    // The model's files first: the longest wait, and one shared with any install running meanwhile.
    const weights = this.#weightsOf(shard, engine.name);
    if ('downloading' in weights) return weights;
    const container = isContainerProfile(profile);
    // The engine's binary as the agent installed it: for a process shard of an engine it installs.
    const installed = engine.installedByAgent && !container ? llama : {};
    if (installed.error !== undefined) throw new Error(installed.error);
    if (installed.waiting !== undefined) return { waiting: installed.waiting };
    const settings: EngineSettings = {
      bin: engineBin({ engine, container, installed: llama.bin, local: this.#o.localBins, sent: engines }),
      llamacpp: { parallel: engines.llamacpp.parallel, threads: engines.llamacpp.threads },
      cpuCount: this.#o.inventory()?.host.cpus.count ?? 1,
    };
    const bindHost = typeof this.#o.bindHost === 'string' ? this.#o.bindHost : this.#o.bindHost();
    // A container on bridge networking listens on every address of its own namespace; the
    // daemon publishes its port on the node's bind address. Ranks of a multi-node replica
    // reach each other as host processes do, so they share the node's network instead.
    const bridge = container && shard.ranks === 1;
    const launch: ShardLaunch = {
      replica: shard.replica,
      model: shard.model,
      profile,
      rank: shard.rank,
      ranks: shard.ranks,
      host: bridge ? '0.0.0.0' : bindHost,
      port: shard.port,
      head: shard.head,
      devices,
      threads: shard.threads,
      apiKey: shard.api_key,
      weights,
      settings,
    };
    const models = join(this.#o.dataDir, 'models');
    const processes = engine.commands(launch).map((p) => ({
      ...p,
      env: {
        // The agent fetched the files: an engine reads them from the cache, offline, and fetches nothing.
        HF_HOME: join(models, 'huggingface'),
        HF_HUB_CACHE: this.#weights.root,
        HF_HUB_OFFLINE: '1',
        ...installed.env,
        ...p.env,
      },
    }));
    const localHost = bindHost === '0.0.0.0' ? '127.0.0.1' : bindHost;
    const run: ShardRun = {
      key: `${shard.replica}/${shard.rank}`,
      replica: shard.replica,
      rank: shard.rank,
      processes,
      ...(engine.servesHttp(shard.rank, shard.ranks)
        ? {
            health: {
              url: `http://${localHost.includes(':') ? `[${localHost}]` : localHost}:${shard.port}${engine.healthPath}`,
              loading: engine.loading,
              apiKey: shard.api_key,
            },
          }
        : {}),
      ...(devices.length > 0 ? { gpu: { uuids: devices.map((d) => d.uuid) } } : {}),
      ...(devices.length > 0 && installed.cpuOnly !== undefined ? { degradedReason: installed.cpuOnly } : {}),
      stopGraceMs: engines.stop_grace_s * 1000,
    };
    if (!container) return run;
    return containerRun(
      run,
      { shard, profile, engines, weights, devices, bindHost, bridge },
      {
        settings: this.#o.containers?.settings,
        gpuRequest: this.#o.containers?.gpuRequest?.(),
        nodeId: this.#o.containers?.nodeId?.() ?? this.#o.inventory()?.host.hostname ?? 'unknown',
        dataDir: this.#o.dataDir,
      },
    );
  }

  /**
   * The weights an engine is given: a local path as it is; fetched files once they are all
   * here (a download is started, or its progress said, until then).
   */
  #weightsOf(shard: AssignedShard, engine: EngineName): Weights | { downloading: DownloadProgress } {
    const origin = shard.origin;
    if (origin === undefined || origin.kind === 'path')
      return weightsOf(shard.model.source, this.#nodeName());
    const need = this.#weights.need(shard.model.name, origin);
    if ('failed' in need) throw new Error(need.failed);
    if ('downloading' in need) return need;
    return fetchedWeights(engine, origin, need.ready);
  }

  /** `node NAME`, or `this node` before the machine was read. */
  #nodeName(): string {
    const name = this.#o.inventory()?.host.hostname;
    return name === undefined ? 'this node' : `node ${name}`;
  }
}

function profileOf(shard: AssignedShard) {
  const profile = shard.model.profiles.find((p) => p.name === shard.profile);
  if (profile === undefined) throw new Error(`model ${shard.model.name} has no profile ${shard.profile}`);
  return profile;
}
