import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

import type { Logger } from 'pino';

import { parseSource } from '../models/source.js';
import { writeFileAtomic } from '../config/write.js';
import { messageOf } from '../core/errors.js';
import { engineFor } from '../engines/registry.js';
import {
  isContainerProfile,
  isCpuProfile,
  type EngineName,
  type ProfileSpec,
} from '../catalog/model-spec.js';
import type { ContainersSettings } from '../config/schema.js';
import { chooseImage, imageExecutables } from '../engines/container-images.js';
import type { EngineSettings, ShardLaunch, Weights } from '../engines/types.js';
import { devicesOf } from '../gpu/devices.js';
import type { Device, NodeInventory } from '../gpu/types.js';
import type { FetchResult } from '../models/model-fetcher.js';
import type { Origin } from '../models/origin.js';
import {
  maxPortRanges,
  type AgentMessage,
  type AssignedShard,
  type DownloadProgress,
  type EngineReport,
  type EngineSettingsWire,
  type ServerMessage,
  type ShardStatusWire,
} from '../protocol/agent-protocol.js';

import {
  chooseFlavour,
  installLlamaCpp,
  llamaEnv,
  type InstalledLlama,
  type LlamaInstallOptions,
} from './installer/index.js';
import { containerLabels, type ContainerMount, type GpuRequestKind } from './shards/container/types.js';
import { containerRunHash } from './shards/container/wiring-hash.js';
import type { EngineRunner } from './engine-runners.js';
import { toRanges } from './shards/process/sockets.js';
import type { ShardRun } from './shards/types.js';
import { AgentWeights, isProjector, type AgentWeightsOptions } from './weights.js';

type Assign = Extract<ServerMessage, { type: 'assign' }>;

export interface ShardExecutorOptions {
  dataDir: string;
  logger: Logger;
  /** The process supervisor, or the composite that also runs container profiles (engine-runners.ts). */
  supervisor: EngineRunner;
  /** Engine binaries this node's own settings name; they win over the control plane's. */
  localBins: {
    llamacpp?: string | undefined;
    vllm?: string | undefined;
    sglang?: string | undefined;
    trtllm?: string | undefined;
  };
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

/** The llama-server shards run: its path and environment, or why they wait. */
interface LlamaChoice {
  bin?: string;
  env?: Record<string, string>;
  waiting?: string;
  /** Why llama.cpp shards cannot start (an install that failed). */
  error?: string;
  /** Set when the build sees no GPU on a GPU node. */
  cpuOnly?: string;
}

interface Install {
  key: string;
  state: 'installing' | 'done' | 'failed';
  progress?: string;
  result?: InstalledLlama;
  error?: string;
  failedAt?: number;
}

/**
 * The agent's side of placement: turns what the control plane assigns this node into
 * engine processes (installing llama.cpp first where needed), hands them to the
 * supervisor, and reports their states back. The last assignment is kept on disk, so a
 * restarted agent starts its engines again even while the control plane is away.
 */
export class ShardExecutor {
  readonly #o: ShardExecutorOptions;
  #desired: Assign | undefined;
  /** Shards that could not be turned into processes: a missing model, an install that failed. */
  readonly #blocked = new Map<string, ShardStatusWire>();
  /** Shards whose engine waits for its model's files. */
  readonly #waiting = new Map<string, Waiting>();
  readonly #weights: AgentWeights;
  #install: Install | undefined;
  readonly #follows = new Map<string, () => void>();
  #reportTimer: NodeJS.Timeout | undefined;
  #portsTimer: NodeJS.Timeout | undefined;
  /** The ports last reported taken, as sent. */
  #lastPorts = '';
  #adoptTimer: NodeJS.Timeout | undefined;

  constructor(options: ShardExecutorOptions) {
    this.#o = options;
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
    return join(this.#o.dataDir, 'agent', 'assignment.json');
  }

  /**
   * Starts what the last saved assignment said, before the control plane is reached: the
   * engines an earlier agent left running for it are taken over, not started again.
   */
  resume(): void {
    if (this.#o.supervisor.unclaimed().length > 0) {
      // Unassigned ones are stopped once a control plane says what runs here, or after the grace without one.
      this.#adoptTimer = setTimeout(() => {
        this.#adoptTimer = undefined;
        this.#release(new Set((this.#desired?.shards ?? []).map((s) => `${s.replica}/${s.rank}`)));
      }, this.#o.adoptGraceMs ?? 60_000);
      this.#adoptTimer.unref();
    }
    if (!existsSync(this.assignmentFile)) return;
    try {
      const saved = JSON.parse(readFileSync(this.assignmentFile, 'utf8')) as Assign;
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
      writeFileAtomic(this.assignmentFile, JSON.stringify(m));
      this.#weights.configure(m.weights);
      this.#sync();
      if (this.#adoptTimer !== undefined) clearTimeout(this.#adoptTimer);
      this.#adoptTimer = undefined;
      this.#release(new Set(m.shards.map((s) => `${s.replica}/${s.rank}`)));
      this.#watchPorts();
      void this.#weights.evict();
    } else if (m.type === 'pull') this.#weights.pull(m.model, m.origin);
    else if (m.type === 'cache_list') void this.#weights.cacheList(m.request);
    else if (m.type === 'purge') void this.#weights.purge(m.model, m.origins);
    else if (m.type === 'logs') this.#logs(m);
    else {
      this.#follows.get(m.request)?.();
      this.#follows.delete(m.request);
    }
  }

  /** Sends every shard's state (after a reconnection, and after any change). */
  report(): void {
    if (this.#reportTimer !== undefined) return;
    // Changes come in bursts (a start is several transitions): one message for each burst.
    this.#reportTimer = setTimeout(() => {
      this.#reportTimer = undefined;
      const statuses = [
        ...this.#o.supervisor.statuses(),
        ...this.#blocked.values(),
        ...[...this.#waiting.values()].map((w) => this.#waitingStatus(w)),
      ];
      const ports = this.#portsTaken();
      if (ports !== undefined) this.#lastPorts = JSON.stringify(ports);
      this.#o.send({
        type: 'shards',
        statuses,
        engines: this.#engineReport(),
        ...(ports === undefined ? {} : { ports_taken: ports }),
      });
    }, 50);
    this.#reportTimer.unref();
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
    for (const cancel of this.#follows.values()) cancel();
    if (this.#portsTimer !== undefined) clearInterval(this.#portsTimer);
    if (this.#adoptTimer !== undefined) clearTimeout(this.#adoptTimer);
    return this.#weights.stop();
  }

  /** Stops the earlier agent's engines not taken over yet whose shard is not in `assigned`. */
  #release(assigned: ReadonlySet<string>): void {
    const stopped = this.#o.supervisor.releaseUnclaimed((key) => assigned.has(key));
    if (stopped.length > 0)
      this.#o.logger.warn(
        { shards: stopped },
        'stopping engines an earlier agent started for shards no longer placed here',
      );
  }

  /**
   * Ports other programs listen on, as ranges: within the placement range once an
   * assignment named it, every one before (the control plane places nothing on a node
   * before its first report). Undefined where this machine cannot tell.
   */
  #portsTaken(): [number, number][] | undefined {
    const range = this.#desired?.ports ?? { first: 1, last: 65535 };
    const ports = this.#o.supervisor.portsTaken(range.first, range.last);
    return ports === undefined ? undefined : toRanges(ports).slice(0, maxPortRanges);
  }

  /** Looks now and again at the ports other programs take, and reports when that changed. */
  #watchPorts(): void {
    if (this.#portsTimer !== undefined) return;
    this.#portsTimer = setInterval(() => {
      try {
        const ports = this.#portsTaken();
        if (ports !== undefined && JSON.stringify(ports) !== this.#lastPorts) this.report();
      } catch (e) {
        this.#o.logger.warn({ err: messageOf(e) }, 'could not read which ports are taken');
      }
    }, this.#o.portsIntervalMs ?? 5000);
    this.#portsTimer.unref();
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
    const llama = this.#llama(desired.engines, inventory, desired.shards);
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

  /** The llama-server to run: this node's, the control plane's, or the one installed here. */
  #llama(
    engines: EngineSettingsWire,
    inventory: NodeInventory | undefined,
    shards: readonly AssignedShard[],
  ): LlamaChoice {
    const local = this.#o.localBins.llamacpp ?? engines.llamacpp.bin;
    if (local !== undefined) return { bin: local };
    // Containers bring their own llama-server: only process profiles need one installed.
    if (
      !shards.some((s) => {
        const p = profileOf(s);
        return p.engine === 'llamacpp' && !isContainerProfile(p);
      })
    )
      return {};
    const cards = inventory?.gpu.cards ?? [];
    const mig = cards.some((c) => c.mig?.current === true);
    const { flavour, warning } = chooseFlavour(
      cards.length > 0,
      mig,
      engines.llamacpp.cuda_archive,
      process.arch,
    );
    const key = `${engines.llamacpp.build}-${flavour}`;
    if (
      this.#install?.key !== key ||
      (this.#install.state === 'failed' && Date.now() - (this.#install.failedAt ?? 0) > 60_000)
    ) {
      this.#startInstall(key, engines, flavour);
    }
    const install = this.#install;
    if (install === undefined || install.state === 'installing')
      return {
        waiting: `installing llama.cpp ${key}${install?.progress === undefined ? '' : ` (${install.progress})`}`,
      };
    if (install.state === 'failed' || install.result === undefined) {
      return {
        error: `could not install llama.cpp ${key} (tried again in a minute): ${install.error ?? 'unknown error'}`,
      };
    }
    const result = install.result;
    const cpuOnly =
      cards.length > 0 && result.devices.length === 0
        ? `this node has GPUs but its llama.cpp build (${result.build}, ${result.flavour}) lists none, so llama.cpp runs on the CPU at about a tenth of the speed${warning === undefined ? '' : `; ${warning}`}: set agent.engines.llamacpp.cuda_archive to a CUDA build, or check the Vulkan driver`
        : undefined;
    return { bin: result.bin, env: llamaEnv(result.bin), ...(cpuOnly === undefined ? {} : { cpuOnly }) };
  }

  #startInstall(
    key: string,
    engines: EngineSettingsWire,
    flavour: ReturnType<typeof chooseFlavour>['flavour'],
  ): void {
    const install: Install = { key, state: 'installing' };
    this.#install = install;
    let lastLog = 0;
    const run = this.#o.install ?? installLlamaCpp;
    this.#o.logger.info({ build: engines.llamacpp.build, flavour }, 'installing llama.cpp');
    run({
      build: engines.llamacpp.build,
      releaseUrl: engines.llamacpp.release_url,
      flavour,
      cudaArchive: engines.llamacpp.cuda_archive,
      sha256: engines.llamacpp.sha256,
      arch: process.arch,
      dataDir: this.#o.dataDir,
      onProgress: (p) => {
        const pct =
          p.total === undefined || p.received === undefined
            ? undefined
            : Math.floor((p.received / p.total) * 100);
        install.progress =
          p.phase === 'download' ? `downloading${pct === undefined ? '' : ` ${pct}%`}` : p.phase;
        const now = Date.now();
        if (now - lastLog > 2000 || p.phase !== 'download') {
          lastLog = now;
          this.#o.logger.info(
            { phase: p.phase, received: p.received, total: p.total, message: p.message },
            `llama.cpp ${key}: ${install.progress}`,
          );
          this.report();
        }
      },
    }).then(
      (result) => {
        if (this.#install !== install) return;
        install.state = 'done';
        install.result = result;
        const cards = this.#o.inventory()?.gpu.cards ?? [];
        if (cards.length > 0 && result.devices.length === 0) {
          this.#o.logger.error(
            { build: result.build, flavour: result.flavour },
            'this node has GPUs but the llama.cpp build lists none: llama.cpp replicas here run on the CPU, about ten times slower',
          );
        } else {
          this.#o.logger.info(
            { bin: result.bin, version: result.version, devices: result.devices, reused: result.reused },
            'llama.cpp ready',
          );
        }
        this.#sync();
      },
      (e: unknown) => {
        if (this.#install !== install) return;
        install.state = 'failed';
        install.failedAt = Date.now();
        install.error = messageOf(e);
        this.#o.logger.error({ err: install.error }, 'llama.cpp install failed');
        this.#sync();
        // Tried again later: the mirror may come back, or the network be fixed.
        setTimeout(() => this.#sync(), 61_000).unref();
      },
    );
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
    if (!container && engine.name === 'llamacpp' && llama.error !== undefined) throw new Error(llama.error);
    if (!container && engine.name === 'llamacpp' && llama.waiting !== undefined)
      return { waiting: llama.waiting };
    const settings: EngineSettings = {
      llamacpp: {
        bin: container ? imageExecutables.llamacpp : (llama.bin ?? 'llama-server'),
        parallel: engines.llamacpp.parallel,
        threads: engines.llamacpp.threads,
      },
      vllm: { bin: container ? imageExecutables.vllm : (this.#o.localBins.vllm ?? engines.vllm.bin) },
      sglang: { bin: container ? imageExecutables.sglang : (this.#o.localBins.sglang ?? engines.sglang.bin) },
      trtllm: { bin: container ? imageExecutables.trtllm : (this.#o.localBins.trtllm ?? engines.trtllm.bin) },
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
        ...(engine.name === 'llamacpp' && !container ? llama.env : {}),
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
      ...(!container && engine.name === 'llamacpp' && devices.length > 0 && llama.cpuOnly !== undefined
        ? { degradedReason: llama.cpuOnly }
        : {}),
      stopGraceMs: engines.stop_grace_s * 1000,
    };
    if (!container) return run;
    return this.#container(run, { shard, profile, engines, weights, devices, bindHost, bridge });
  }

  /**
   * The container a shard runs as: the engine's image, its devices by UUID, the model's
   * files read-only at the same path, the port published on the node's address (or the
   * node's network for multi-node ranks), and llmgw's labels.
   */
  #container(
    run: ShardRun,
    c: {
      shard: AssignedShard;
      profile: ProfileSpec;
      engines: EngineSettingsWire;
      weights: Weights;
      devices: readonly Device[];
      bindHost: string;
      bridge: boolean;
    },
  ): ShardRun {
    const settings = this.#o.containers?.settings;
    const engine = c.profile.engine;
    const image = chooseImage({
      engine,
      profileImage: c.profile.image,
      settingsImage: settings?.images[engine],
      gpu: !isCpuProfile(c.profile),
      llamaBuild: c.engines.llamacpp.build,
      registry: settings?.registry,
    });
    const fetched = c.shard.origin !== undefined && c.shard.origin.kind !== 'path';
    const mounts = containerMounts([
      // Fetched files are in the agent's cache (HF_HUB_CACHE, HF_HOME); a local model is where it is.
      ...(fetched ? [join(this.#o.dataDir, 'models')] : [c.weights.path]),
      ...(c.weights.projector === undefined ? [] : [c.weights.projector]),
      ...c.profile.adapters.map((a) => a.path),
    ]);
    const nodeId = this.#o.containers?.nodeId?.() ?? this.#o.inventory()?.host.hostname ?? 'unknown';
    const withContainer: ShardRun = {
      ...run,
      container: {
        image,
        pull: settings?.pull ?? 'missing',
        gpus: c.devices.map((d) => d.uuid),
        gpuRequest: this.#o.containers?.gpuRequest?.() ?? (settings?.gpus === 'cdi' ? 'cdi' : 'nvidia'),
        mounts,
        network: c.bridge ? 'bridge' : 'host',
        ...(c.bridge ? { publish: { hostIp: c.bindHost, port: c.shard.port } } : {}),
        ipc:
          (settings?.ipc ?? 'host') === 'host'
            ? 'host'
            : { shmBytes: Math.round((settings?.shm_size_gb ?? 16) * 1e9) },
        labels: {},
      },
    };
    const hash = containerRunHash(withContainer);
    return {
      ...withContainer,
      container: {
        ...(withContainer.container as NonNullable<ShardRun['container']>),
        labels: {
          [containerLabels.shard]: run.key,
          [containerLabels.replica]: run.replica,
          [containerLabels.node]: nodeId,
          [containerLabels.hash]: hash,
        },
      },
    };
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

  #engineReport(): EngineReport {
    const i = this.#install;
    if (i === undefined) return {};
    const cards = this.#o.inventory()?.gpu.cards ?? [];
    const r = i.result;
    return {
      llamacpp: {
        ...(r === undefined ? {} : { bin: r.bin, build: r.build, flavour: r.flavour, devices: r.devices }),
        ...(i.state === 'installing' ? { installing: i.progress ?? 'starting' } : {}),
        ...(i.state === 'failed' ? { warning: `install failed: ${i.error ?? ''}` } : {}),
        ...(r !== undefined && cards.length > 0 && r.devices.length === 0
          ? {
              warning:
                'this node has GPUs but its llama.cpp build lists none: llama.cpp runs on the CPU here',
            }
          : {}),
      },
    };
  }

  #logs(m: Extract<ServerMessage, { type: 'logs' }>): void {
    const status = this.#o.supervisor.statuses().find((s) => s.key === m.key);
    if (status === undefined) {
      const blocked = this.#blocked.get(m.key);
      // Its engine never started (an install that failed, weights missing): why is its log.
      const error =
        blocked === undefined
          ? `${this.#nodeName()} has no shard ${m.key}: the assignment that places it there has not reached its agent yet, or it was just removed; try again in a few seconds`
          : undefined;
      const lines =
        blocked === undefined
          ? []
          : [notRunning(`the engine has not started: ${blocked.reason ?? blocked.state}`)];
      this.#o.send({
        type: 'log_lines',
        request: m.request,
        lines,
        done: true,
        ...(error === undefined ? {} : { error }),
      });
      return;
    }
    const lines = this.#o.supervisor.logs(m.key, m.tail);
    // No process runs (it could not be started, or waits to start again): say why after what it last wrote.
    if (status.pid === undefined && status.reason !== undefined && status.state === 'failed') {
      lines.push(notRunning(`the engine is not running: ${status.reason}`));
    }
    this.#o.send({ type: 'log_lines', request: m.request, lines, done: !m.follow });
    if (!m.follow) return;
    let batch: string[] = [];
    let timer: NodeJS.Timeout | undefined;
    const flush = () => {
      timer = undefined;
      if (batch.length === 0) return;
      const lines = batch;
      batch = [];
      this.#o.send({ type: 'log_lines', request: m.request, lines, done: false });
    };
    const unfollow = this.#o.supervisor.follow(m.key, (line) => {
      batch.push(line);
      timer ??= setTimeout(flush, 100);
    });
    this.#follows.set(m.request, () => {
      unfollow();
      if (timer !== undefined) clearTimeout(timer);
    });
  }
}

/**
 * Read-only bind mounts at the same path as on the node, each once: a path under another
 * mounted one is already in the container.
 */
export function containerMounts(paths: readonly string[]): ContainerMount[] {
  const unique = [...new Set(paths.map((p) => p.replace(/\/+$/, '') || '/'))].sort();
  const kept: string[] = [];
  for (const p of unique) if (!kept.some((k) => p === k || p.startsWith(`${k}/`))) kept.push(p);
  return kept.map((p) => ({ source: p, target: p, readOnly: true }));
}

/** A line of the agent's own in a log it sends, marked as the supervisor's notes in log files are. */
function notRunning(text: string): string {
  return `--- llmgw: ${text}`;
}

function profileOf(shard: AssignedShard) {
  const profile = shard.model.profiles.find((p) => p.name === shard.profile);
  if (profile === undefined) throw new Error(`model ${shard.model.name} has no profile ${shard.profile}`);
  return profile;
}

/**
 * What an engine is given of fetched files: llama.cpp the first GGUF of the origin (the first
 * part of a split one) and its projector; the others the snapshot directory.
 */
export function fetchedWeights(engine: EngineName, origin: Origin, fetched: FetchResult): Weights {
  if (engine !== 'llamacpp') return { path: fetched.snapshotDir };
  const ggufs = origin.files.filter((f) => f.path.toLowerCase().endsWith('.gguf'));
  const model = ggufs.find((f) => !isProjector(f.path));
  const projector = ggufs.find((f) => isProjector(f.path));
  if (model === undefined)
    throw new Error(
      `${origin.source} has no GGUF model file (${origin.files.map((f) => f.path).join(', ')}): llamacpp serves GGUF weights; name a .gguf file of it, or use engine: vllm or sglang`,
    );
  const at = (path: string) => fetched.paths[path] ?? join(fetched.snapshotDir, ...path.split('/'));
  return { path: at(model.path), ...(projector === undefined ? {} : { projector: at(projector.path) }) };
}

/**
 * The weights of a model given by a local path, as this node (`node NAME`) has them. A hub
 * repository or URL is fetched by the agent from the origin the control plane sends with the
 * shard; without one it cannot be, and no engine downloads for itself.
 */
export function weightsOf(source: string, node: string): Weights {
  // Throws, in words, for a source that is not one llmgw reads (the catalog refused it already).
  const parsed = parseSource(source);
  if (parsed.kind !== 'path')
    throw new Error(
      `the control plane sent no pinned files for ${source}, so ${node} cannot fetch it: upgrade the control plane to this agent's version, or update the model (llmgw ctl model apply) so its source is resolved again`,
    );
  let stat;
  try {
    stat = statSync(parsed.path);
  } catch {
    throw new Error(
      `the model's weights ${parsed.path} are not on ${node}: put them there (the path must be the same on every node), or use a hf:// source`,
    );
  }
  return stat.isDirectory() ? { path: parsed.path, files: readdirSync(parsed.path) } : { path: parsed.path };
}
