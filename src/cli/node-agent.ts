import { join } from 'node:path';

import type { Logger } from 'pino';

import { Agent } from '../agent/agent.js';
import { NodeEngineProxy } from '../agent/engine-proxy-node.js';
import { ShardExecutor } from '../agent/shard-executor.js';
import { killLeftovers } from '../agent/supervisor/leftovers.js';
import { Supervisor } from '../agent/supervisor/supervisor.js';
import type { Settings } from '../config/load.js';
import type { NodeInventory } from '../gpu/types.js';

import { trustCaForOrigin } from '../models/http-get.js';
import { agentTrust, splitJoinToken } from '../tls/trust.js';

import { inventoryReader } from './inventory.js';

export interface NodeAgentOptions {
  server: string;
  token: string | undefined;
  name?: string | undefined;
  settings: Settings;
  logger: Logger;
  /** Restart backoff of the channel (tests shorten it). */
  backoff?: { initialMs: number; maxMs: number };
}

export interface NodeAgent {
  agent: Agent;
  executor: ShardExecutor;
  stop: () => Promise<void>;
}

const defaultBins = { vllm: 'vllm', sglang: 'python3', trtllm: 'trtllm-serve' } as const;

/**
 * A node's agent, composed: discovery, the channel to the control plane, the executor of
 * assignments and the supervisor of engines. Used by `llmgw agent` and `llmgw up`.
 */
export async function startNodeAgent(o: NodeAgentOptions): Promise<NodeAgent> {
  const dataDir = o.settings.data_dir;
  // A token may carry the cluster CA's hash: checked against what an https server presents, then pinned.
  const given = o.token === undefined ? undefined : splitJoinToken(o.token);
  const ca = await agentTrust({
    server: o.server,
    pinFile: join(dataDir, 'agent', 'server-ca.pem'),
    caHash: given?.caHash,
  });
  // The mirror is on the control plane: model files come over the same trust.
  if (ca !== undefined) trustCaForOrigin(o.server, ca);
  const stateFile = join(dataDir, 'agent', 'processes.json');
  // Engines an agent that crashed left behind still hold their ports and GPU memory.
  for (const k of await killLeftovers(stateFile))
    o.logger.warn({ leftover: k }, 'stopped an engine a previous agent left running');

  const address = o.settings.agent.address;
  const read = inventoryReader(dataDir, address);
  let latest: NodeInventory | undefined;
  // Gateways on other machines reach this node's engines through it, over TLS.
  const proxy = await NodeEngineProxy.start({
    server: o.server,
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
  const host = new URL(o.server).hostname;
  const loopback = host === 'localhost' || host.startsWith('127.') || host === '[::1]' || host === '::1';
  const engines = o.settings.agent.engines;
  const exec = new ShardExecutor({
    dataDir,
    logger: o.logger,
    supervisor,
    localBins: {
      llamacpp: engines.llamacpp.bin,
      ...(engines.vllm.bin === defaultBins.vllm ? {} : { vllm: engines.vllm.bin }),
      ...(engines.sglang.bin === defaultBins.sglang ? {} : { sglang: engines.sglang.bin }),
      ...(engines.trtllm.bin === defaultBins.trtllm ? {} : { trtllm: engines.trtllm.bin }),
    },
    inventory: () => latest,
    send: (m) => late.agent?.send(m) ?? false,
    // Engines answer the gateway only; on one machine, or behind the engine proxy, that is loopback.
    bindHost: () => proxy?.bindHost(address ?? '0.0.0.0') ?? address ?? (loopback ? '127.0.0.1' : '0.0.0.0'),
    // The mirror is the control plane, and takes the node's own credential.
    controlPlane: () => ({
      url: o.server,
      credential: late.agent?.identity.credential,
      nodeId: late.agent?.identity.id,
    }),
    models: {
      maxBytes:
        o.settings.agent.models.max_gb === undefined ? undefined : o.settings.agent.models.max_gb * 1e9,
    },
  });
  late.executor = exec;
  const a = new Agent({
    server: o.server,
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
  return {
    agent: a,
    executor: exec,
    stop: async () => {
      await a.stop();
      await exec.stop();
      await proxy?.close();
    },
  };
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
