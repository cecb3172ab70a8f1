import { existsSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

import type { Logger } from 'pino';

import { Agent } from '../agent/agent.js';
import { containersUsedFile, gpuRequestFor, probeDaemon } from '../agent/container-daemon.js';
import type { DaemonKind, GpuRequestKind } from '../agent/shards/container/types.js';
import { ContainerSupervisor } from '../agent/shards/container/container-supervisor.js';
import { DaemonClient } from '../agent/shards/container/daemon.js';
import { EngineRunners } from '../agent/engine-runners.js';
import { NodeEngineProxy } from '../agent/engine-proxy-node.js';
import { ShardExecutor } from '../agent/shard-executor.js';
import { Supervisor } from '../agent/shards/process/process-supervisor.js';
import type { GpuProcessReader, ShardRunner, ShardStatus } from '../agent/shards/types.js';
import type { Settings } from '../config/load.js';
import { engines as registry } from '../engines/registry.js';
import type { NodeInventory } from '../gpu/types.js';

import { isLlmgwError } from '../core/errors.js';
import { trustCaForOrigin } from '../models/http-get.js';
import { agentTrust, splitJoinToken } from '../tls/trust.js';

import { inventoryReader } from './inventory.js';

export interface NodeAgentOptions {
  /** The control plane, or several of the same cluster: the agent moves to the next when it loses one. */
  server: string | readonly string[];
  token: string | undefined;
  name?: string | undefined;
  settings: Settings;
  logger: Logger;
  /** Restart backoff of the channel (tests shorten it). */
  backoff?: { initialMs: number; maxMs: number };
  /** How long an earlier agent's engines that no assignment places here are kept without a control plane (default 60 s). */
  adoptGraceMs?: number;
  /**
   * Makes the container supervisor, once a profile with runtime: container is placed here
   * and the node's daemon answered (default: ContainerSupervisor over that daemon).
   */
  containerRunner?: (o: ContainerRunnerOptions) => ShardRunner;
}

/** What the agent gives the container supervisor it makes. */
export interface ContainerRunnerOptions {
  /** The daemon's address: unix:///PATH or tcp://HOST:PORT. */
  host: string;
  kind: DaemonKind;
  /** The `llmgw.node` label of this node's containers: those of other nodes on a shared daemon are left alone. */
  nodeId: string;
  onStatus: (status: ShardStatus) => void;
  /** A stopped shard has left `statuses()` (its container is gone). */
  onRemoved: (key: string) => void;
  /** A container labelled for this node that no shard claims is removed after this long (agent.containers.orphan_grace_s). */
  orphanGraceMs: number;
  /** Which processes hold memory on each GPU (from the node's discovery). */
  gpuProcesses: GpuProcessReader;
}

export interface NodeAgent {
  agent: Agent;
  executor: ShardExecutor;
  supervisor: Supervisor;
  /** The process supervisor and, once a container profile needed it, the container supervisor. */
  engines: EngineRunners;
  /** Stops the agent and its engines. */
  stop: () => Promise<void>;
  /** Stops the agent and leaves its engines running, for the next agent to adopt. */
  detach: () => Promise<void>;
}

/**
 * A node's agent, composed: discovery, the channel to the control plane, the executor of
 * assignments and the supervisor of engines. Used by `llmgw agent` and `llmgw up`.
 */
export async function startNodeAgent(o: NodeAgentOptions): Promise<NodeAgent> {
  const dataDir = o.settings.data_dir;
  const servers = typeof o.server === 'string' ? [o.server] : [...o.server];
  // A token may carry the cluster CA's hash: checked against what an https server presents, then
  // pinned. Control planes of one cluster share the CA: the first that answers is checked.
  const given = o.token === undefined ? undefined : splitJoinToken(o.token);
  let ca: string | undefined;
  for (const [i, server] of servers.entries()) {
    try {
      ca = await agentTrust({
        server,
        pinFile: join(dataDir, 'agent', 'server-ca.pem'),
        caHash: given?.caHash,
      });
      break;
    } catch (e) {
      if (!isLlmgwError(e) || e.code !== 'unavailable' || i === servers.length - 1) throw e;
    }
  }
  // The mirror is on the control plane: model files come over the same trust.
  if (ca !== undefined) for (const server of servers) trustCaForOrigin(server, ca);
  const stateFile = join(dataDir, 'agent', 'processes.json');

  const address = o.settings.agent.address;
  const read = inventoryReader(dataDir, address);
  let latest: NodeInventory | undefined;
  // Gateways on other machines reach this node's engines through it, over TLS.
  const proxy = await NodeEngineProxy.start({
    // Loopback or not: control planes of one cluster are all one or the other.
    server: servers[0] ?? '',
    address,
    port: o.settings.agent.proxy_port,
    dataDir,
    logger: o.logger,
    assignmentFile: join(dataDir, 'agent', 'assignment.json'),
  });
  const inventory = async () => {
    const now = await read();
    return (latest = proxy?.inventory(now) ?? now);
  };
  await inventory();

  // The supervisor reports to the executor, which sends through the agent: made in that order, wired late.
  const late: { executor?: ShardExecutor; agent?: Agent } = {};
  const supervisor = new Supervisor({
    logDir: join(dataDir, 'logs'),
    stateFile,
    onStatus: (s) => {
      o.logger.info({ shard: s.key, state: s.state, reason: s.reason, restarts: s.restarts }, 'shard');
      late.executor?.report();
    },
    onRemoved: () => late.executor?.report(),
    gpuProcesses: async () => gpuHolders(await inventory()),
  });
  logAdoption(o.logger, supervisor);
  // Container profiles: the daemon is asked only once one is placed here.
  const containers = o.settings.agent.containers;
  const containersUsed = join(dataDir, containersUsedFile);
  let gpuRequest: GpuRequestKind | undefined;
  const engineRunners = new EngineRunners({
    supervisor,
    containers: async () => {
      const daemon = await probeDaemon(containers, process.env);
      gpuRequest = gpuRequestFor(containers.gpus, daemon);
      o.logger.info(
        {
          daemon: daemon.address.url,
          kind: daemon.kind,
          version: daemon.version,
          gpus: gpuRequest,
          runtimes: daemon.runtimes,
        },
        'container daemon answers',
      );
      // This node has run containers: its next agent looks for leftovers at once (connectContainers).
      writeFileSync(containersUsed, `${new Date().toISOString()}\n`);
      const make = o.containerRunner ?? defaultContainerRunner;
      return make({
        host: daemon.address.url,
        kind: daemon.kind,
        nodeId: late.agent?.identity.id ?? hostname(),
        onStatus: (s) => {
          o.logger.info(
            { shard: s.key, state: s.state, reason: s.reason, restarts: s.restarts },
            'container shard',
          );
          late.executor?.report();
        },
        onRemoved: () => late.executor?.report(),
        orphanGraceMs: containers.orphan_grace_s * 1000,
        gpuProcesses: async () => gpuHolders(await inventory()),
      });
    },
    // Built again with what the daemon said (how it takes GPUs).
    onContainers: () => late.executor?.resync(),
    onChange: () => late.executor?.report(),
  });
  const loopback = servers.every((s) => {
    const host = new URL(s).hostname;
    return host === 'localhost' || host.startsWith('127.') || host === '[::1]' || host === '::1';
  });
  const engines = o.settings.agent.engines;
  const exec = new ShardExecutor({
    dataDir,
    logger: o.logger,
    supervisor: engineRunners,
    localBins: { ...changedBins(engines), llamacpp: engines.llamacpp.bin },
    inventory: () => latest,
    send: (m) => late.agent?.send(m) ?? false,
    // Engines answer the gateway only; on one machine, or behind the engine proxy, that is loopback.
    bindHost: () => proxy?.bindHost(address ?? '0.0.0.0') ?? address ?? (loopback ? '127.0.0.1' : '0.0.0.0'),
    // The mirror is the control plane, and takes the node's own credential.
    controlPlane: () => ({
      url: late.agent?.server ?? servers[0] ?? '',
      credential: late.agent?.identity.credential,
      nodeId: late.agent?.identity.id,
    }),
    models: {
      maxBytes:
        o.settings.agent.models.max_gb === undefined ? undefined : o.settings.agent.models.max_gb * 1e9,
    },
    ...(o.adoptGraceMs === undefined ? {} : { adoptGraceMs: o.adoptGraceMs }),
    containers: {
      settings: containers,
      gpuRequest: () => gpuRequest ?? (containers.gpus === 'cdi' ? 'cdi' : 'nvidia'),
      nodeId: () => late.agent?.identity.id,
    },
  });
  late.executor = exec;
  const a = new Agent({
    server: servers,
    token: given?.secret,
    ...(ca === undefined ? {} : { tls: { ca } }),
    dataDir,
    name: o.name,
    logger: o.logger,
    inventory,
    onMessage: (m) => {
      proxy?.message(m);
      exec.handle(m);
    },
    onWelcome: (m) => {
      proxy?.welcome(m);
      exec.report();
    },
    ...(o.backoff === undefined ? {} : { backoff: o.backoff }),
  });
  late.agent = a;
  exec.resume();
  if (existsSync(containersUsed)) engineRunners.connectContainers();
  // The first report then tells the engines taken over as they are (ready), not as being checked.
  await supervisor.adoptedChecked(5000);
  return {
    agent: a,
    executor: exec,
    supervisor,
    engines: engineRunners,
    stop: async () => {
      await a.stop();
      await exec.stop();
      await proxy?.close();
    },
    detach: async () => {
      await a.stop();
      await exec.detach();
    },
  };
}

/** The container supervisor over the daemon that answered (reconnected by it after a failure). */
function defaultContainerRunner(r: ContainerRunnerOptions): ShardRunner {
  return new ContainerSupervisor({
    client: () => DaemonClient.connect(r.host, r.kind),
    node: r.nodeId,
    onStatus: r.onStatus,
    onRemoved: r.onRemoved,
    orphanGraceMs: r.orphanGraceMs,
    gpuProcesses: r.gpuProcesses,
  });
}

/** Says what became of the engines an earlier agent of this node left running. */
function logAdoption(logger: Logger, supervisor: Supervisor): void {
  const { adoptable, stale, foreign, orphans } = supervisor.adoption;
  for (const f of adoptable)
    logger.info(
      { shard: f.key, pids: f.processes.map((p) => p.pid) },
      'found an engine an earlier agent started, running as recorded: taken over if still placed here',
    );
  for (const f of stale)
    logger.warn(
      { shard: f.key, pids: f.processes.map((p) => p.pid), reason: f.reason },
      'stopping an engine an earlier agent started: it cannot be taken over',
    );
  for (const f of foreign)
    logger.info(
      { shard: f.key, pid: f.pid, reason: f.reason },
      'a recorded engine is gone; its pid is left alone',
    );
  for (const o of orphans)
    logger.warn({ shard: o.key, pids: o.pids }, 'killed workers an earlier engine left behind');
}

/** Which processes hold memory on each GPU (a whole card's uuid, or a MIG instance's). */
export function gpuHolders(inventory: NodeInventory): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const card of inventory.gpu.cards) {
    out.set(
      card.uuid,
      card.processes.map((p) => p.pid),
    );
    for (const i of card.instances)
      out.set(
        i.uuid,
        i.processes.map((p) => p.pid),
      );
  }
  return out;
}

/**
 * The engines' executables this node's settings changed from the engine's usual one: they win
 * over the control plane's (a node knows where its own engines are).
 */
function changedBins(
  settings: Readonly<Record<string, { bin?: string | undefined }>>,
): Record<string, string> {
  const changed: Record<string, string> = {};
  for (const engine of registry) {
    const bin = settings[engine.name]?.bin;
    if (bin !== undefined && bin !== engine.defaultBin) changed[engine.name] = bin;
  }
  return changed;
}
