import { z } from 'zod';

import type { ModelSpec } from '../catalog/model-spec.js';
import type { NodeInventory } from '../gpu/types.js';
import { originSchema } from '../models/origin.js';

/**
 * The agent channel: one WebSocket per node, opened by the agent (so nodes behind NAT
 * join), JSON text frames both ways. The agent authenticates on the upgrade request;
 * every frame is validated here on arrival. Objects are not strict: an agent newer than
 * its control plane may send fields this one does not know yet.
 */

export const agentChannelPath = '/api/v1/agent/connect';

/** Headers of the upgrade request. The secret goes in Authorization: a join token or the node's credential. */
export const nodeIdHeader = 'x-llmgw-node-id';
export const nodeNameHeader = 'x-llmgw-node-name';
export const agentVersionHeader = 'x-llmgw-agent-version';

/**
 * The longest an agent waits between attempts to reach its control plane (its backoff's
 * cap): a control plane that comes back gives its nodes at least this long to return.
 */
export const agentReconnectMaxMs = 30_000;

const processSchema = z.object({ pid: z.int(), name: z.string(), memory_mib: z.number() });
const wearSchema = z.object({
  ecc_uncorrectable: z.number().optional(),
  retired_pages: z.number().optional(),
  remapped_rows_uncorrectable: z.number().optional(),
  remapped_rows_pending: z.boolean().optional(),
  remapped_rows_failure: z.boolean().optional(),
});
const instanceSchema = z.object({
  index: z.int(),
  uuid: z.string(),
  profile: z.string(),
  gpu_instance_id: z.int(),
  compute_instance_id: z.int(),
  memory_total_mib: z.number(),
  memory_used_mib: z.number(),
  processes: z.array(processSchema),
});
const cardSchema = z.object({
  index: z.int(),
  uuid: z.string(),
  name: z.string(),
  class: z.string(),
  pci_bus_id: z.string(),
  memory_total_mib: z.number(),
  memory_used_mib: z.number(),
  temperature_c: z.number().optional(),
  power_w: z.number().optional(),
  power_limit_w: z.number().optional(),
  utilization_pct: z.number().optional(),
  wear: wearSchema,
  mig: z.object({ current: z.boolean(), pending: z.boolean() }).optional(),
  processes: z.array(processSchema),
  instances: z.array(instanceSchema),
});

export const inventorySchema = z.object({
  host: z.object({
    hostname: z.string(),
    os: z.string(),
    arch: z.string(),
    cpus: z.object({ count: z.int().min(0), model: z.string() }),
    memory: z.object({ total_mib: z.number(), free_mib: z.number() }),
    disk: z.object({ path: z.string(), total_mib: z.number(), free_mib: z.number() }),
  }),
  gpu: z.object({
    method: z.enum(['nvml', 'nvidia-smi', 'none']),
    reasons: z.array(z.string()),
    driver_version: z.string().optional(),
    cuda_version: z.string().optional(),
    cards: z.array(cardSchema),
  }),
  agent_version: z.string(),
  address: z.string().optional(),
  /**
   * The node's engine proxy, once it serves TLS: gateways on other machines reach this
   * node's engines through it (`https://address:port/r/<replica>`), as engines listen on
   * the node's loopback only.
   */
  engine_proxy: z.object({ port: z.int().min(1).max(65535) }).optional(),
});

/** What changes between inventories: sent every few seconds. */
export const telemetrySchema = z.object({
  cards: z.array(
    z.object({
      index: z.int(),
      memory_used_mib: z.number(),
      temperature_c: z.number().optional(),
      power_w: z.number().optional(),
      utilization_pct: z.number().optional(),
      processes: z.array(processSchema),
      instances: z.array(
        z.object({ index: z.int(), memory_used_mib: z.number(), processes: z.array(processSchema) }),
      ),
    }),
  ),
  memory_free_mib: z.number(),
  disk_free_mib: z.number(),
});

export type Telemetry = z.output<typeof telemetrySchema>;

/** How far a download is: bytes done of total, the rate over the last seconds, and the time left at it. */
export const downloadProgressSchema = z.object({
  done: z.number().nonnegative(),
  total: z.number().nonnegative(),
  rate_bps: z.number().nonnegative(),
  eta_s: z.number().nonnegative().optional(),
});
export type DownloadProgress = z.output<typeof downloadProgressSchema>;

/** A shard's state on its node, as the agent's supervisor sees it. */
export const shardStatusSchema = z.object({
  key: z.string(),
  replica: z.string(),
  rank: z.int(),
  /** downloading: its engine waits for the model's files to be on the node. */
  state: z.enum(['downloading', 'starting', 'ready', 'degraded', 'failed', 'stopping']),
  reason: z.string().optional(),
  /** Failed, and the agent starts it again by itself then (ISO); absent from agents before it was added. */
  restart_at: z.string().optional(),
  download: downloadProgressSchema.optional(),
  pid: z.int().optional(),
  restarts: z.int(),
  ready_since: z.string().optional(),
  last_exit: z
    .object({
      code: z.int().nullable(),
      signal: z.string().nullable(),
      at: z.string(),
      log_tail: z.array(z.string()),
    })
    .optional(),
  /** Another program listens on the shard's port, so its engine cannot: the control plane places it again. */
  port_taken: z.object({ port: z.int(), pid: z.int().optional(), name: z.string().optional() }).optional(),
});
export type ShardStatusWire = z.output<typeof shardStatusSchema>;

/** What the agent's engines are: which llama-server runs and why, and whether its build sees the GPUs. */
export const engineReportSchema = z.object({
  llamacpp: z
    .object({
      /** installed, configured, path (agent/llama-bin.ts); waiting: shards wait; none: they are refused. */
      source: z.enum(['installed', 'configured', 'path', 'waiting', 'none']).optional(),
      /** In words: `installed build b6000 (cpu) at /…/llama-server`, or the refusal. */
      why: z.string().optional(),
      bin: z.string().optional(),
      build: z.string().optional(),
      flavour: z.string().optional(),
      devices: z.array(z.string()).optional(),
      /** Said loudly: a GPU node whose build lists no GPU runs llama.cpp on the CPU. */
      warning: z.string().optional(),
      installing: z.string().optional(),
    })
    .optional(),
});
export type EngineReport = z.output<typeof engineReportSchema>;

/** One model's files being fetched onto the node (for a shard, or ahead of placement by `ctl model pull`). */
export const downloadReportSchema = downloadProgressSchema.extend({
  model: z.string(),
  /** The origin's source and commit, so a report is matched to the origin it fetches. */
  source: z.string(),
  commit: z.string().optional(),
  state: z.enum(['queued', 'downloading', 'verifying', 'done', 'failed']),
  error: z.string().optional(),
});
export type DownloadReport = z.output<typeof downloadReportSchema>;

/** One origin's files in a cache (a node's or the mirror's). */
export const cacheEntrySchema = z.object({
  /** hf://ORG/REPO, or the URL. */
  source: z.string(),
  /** The snapshot: a hub commit, or a digest of a URL's ETag. */
  snapshot: z.string(),
  /** Models of the catalog whose origin this is (as the node was last told). */
  models: z.array(z.string()),
  files: z.int().nonnegative(),
  bytes: z.number().nonnegative(),
  /** When an engine was last started on these files, or they were last fetched. */
  last_used: z.string().optional(),
  /** Files of it still being fetched. */
  incomplete_bytes: z.number().nonnegative().optional(),
});
export type CacheEntry = z.output<typeof cacheEntrySchema>;

/** The most port ranges one report carries; a port left out is found taken when a shard is placed on it. */
export const maxPortRanges = 512;

export const agentMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('inventory'), inventory: inventorySchema }),
  z.object({ type: z.literal('heartbeat'), telemetry: telemetrySchema }),
  z.object({
    type: z.literal('shards'),
    statuses: z.array(shardStatusSchema),
    engines: engineReportSchema.optional(),
    /**
     * Ports that programs other than the agent's engines listen on, as inclusive ranges:
     * those of the placement range the last assignment gave, or all of them before one did.
     * Placement hands none of them out.
     */
    ports_taken: z.array(z.tuple([z.int(), z.int()])).optional(),
  }),
  /** Every download the node has (running, and those ended in the last minutes); sent as they progress. */
  z.object({ type: z.literal('downloads'), downloads: z.array(downloadReportSchema) }),
  /** The answer to cache_list. */
  z.object({
    type: z.literal('cache'),
    request: z.string(),
    entries: z.array(cacheEntrySchema),
    /** The cache's root, its bound (agent.models.max_gb) and the free disk there. */
    root: z.string(),
    max_bytes: z.number().nonnegative().optional(),
    free_bytes: z.number().nonnegative().optional(),
    error: z.string().optional(),
  }),
  z.object({
    type: z.literal('log_lines'),
    request: z.string(),
    lines: z.array(z.string()),
    done: z.boolean(),
    error: z.string().optional(),
  }),
]);
export type AgentMessage = z.output<typeof agentMessageSchema>;

/** One shard placed on the node, with what its engine needs to start. */
export const assignedShardSchema = z.object({
  replica: z.string(),
  /** The model as the catalog has it (validated there). */
  model: z.custom<ModelSpec>((v) => typeof v === 'object' && v !== null && 'name' in v && 'profiles' in v),
  profile: z.string(),
  rank: z.int(),
  ranks: z.int(),
  port: z.int(),
  dist_port: z.int().optional(),
  /** Multi-node: where rank 0 accepts the others. */
  head: z.object({ address: z.string(), port: z.int() }).optional(),
  /** Device ids on this node (whole card: index; MIG instance: 1000 + 100 × card + instance). */
  devices: z.array(z.int()),
  threads: z.int().optional(),
  memory_mib: z.int().optional(),
  /** The engine's key; only the gateway knows it besides. */
  api_key: z.string(),
  /** The model's files, pinned: the agent fetches them (a local path is used in place) before the engine starts. */
  origin: originSchema.optional(),
});
export type AssignedShard = z.output<typeof assignedShardSchema>;

/** The control plane's engine settings: the llama.cpp build nodes install, and the engines' commands. */
export const engineSettingsSchema = z.object({
  llamacpp: z.object({
    bin: z.string().optional(),
    parallel: z.int(),
    threads: z.int(),
    build: z.string(),
    release_url: z.string(),
    cuda_archive: z.string().optional(),
    sha256: z.string().optional(),
  }),
  vllm: z.object({ bin: z.string() }),
  sglang: z.object({ bin: z.string() }),
  trtllm: z.object({ bin: z.string() }),
  stop_grace_s: z.int(),
});
export type EngineSettingsWire = z.output<typeof engineSettingsSchema>;

/** The executable the settings name for an engine (agent.engines.NAME.bin), if they name one. */
export function configuredBin(sent: EngineSettingsWire, engine: string): string | undefined {
  const byEngine: Readonly<Record<string, unknown>> = sent;
  const entry = byEngine[engine];
  if (typeof entry !== 'object' || entry === null || !('bin' in entry)) return undefined;
  return typeof entry.bin === 'string' ? entry.bin : undefined;
}

/** Where agents fetch model files from, and what of their cache the catalog still names. */
export const weightsSettingsSchema = z.object({
  /** Fetch through the control plane's mirror (mirror.enabled), else straight from the hub. */
  mirror: z.boolean(),
  /** The hub, for agents that fetch from it themselves (hub.endpoint; the token only then). */
  hub_endpoint: z.string(),
  hub_token: z.string().optional(),
  /** Blob keys of every model in the catalog: the cache evicts the others first. */
  catalog_blobs: z.array(z.string()),
});
export type WeightsSettingsWire = z.output<typeof weightsSettingsSchema>;

export const serverMessageSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('welcome'),
    node: z.object({ id: z.string(), name: z.string() }),
    /** Sent once, on a join with a token: the node's own secret from now on. */
    credential: z.string().optional(),
    heartbeat_ms: z.int().min(100),
    /**
     * The node's engine proxy certificate (PEM), issued by the cluster CA for the node's
     * address, with that CA; sent on every welcome, so a renewed one reaches the node.
     * Absent (TLS off): engines listen where gateways reach them directly.
     */
    tls: z.object({ cert: z.string(), key: z.string(), ca: z.string() }).optional(),
  }),
  /** Every shard the node should run; the agent starts, keeps and stops processes to match. */
  z.object({
    type: z.literal('assign'),
    shards: z.array(assignedShardSchema),
    engines: engineSettingsSchema,
    /** placement.ports: the range whose ports taken by other programs the agent reports. */
    ports: z.object({ first: z.int(), last: z.int() }).optional(),
    weights: weightsSettingsSchema.optional(),
  }),
  /** Fetch a model's files onto this node now, ahead of placement (`ctl model pull`). */
  z.object({ type: z.literal('pull'), model: z.string(), origin: originSchema }),
  /** List what the node's cache holds; answered by a `cache` message with the same request. */
  z.object({ type: z.literal('cache_list'), request: z.string() }),
  /** Remove these origins' files from the node's cache (`ctl model rm --purge`), except those a running engine uses. */
  z.object({ type: z.literal('purge'), model: z.string(), origins: z.array(originSchema) }),
  /** Recent log lines of a shard, and (follow) each new one until cancelled. */
  z.object({
    type: z.literal('logs'),
    request: z.string(),
    key: z.string(),
    tail: z.int().min(0),
    follow: z.boolean(),
  }),
  z.object({ type: z.literal('logs_cancel'), request: z.string() }),
]);
export type ServerMessage = z.output<typeof serverMessageSchema>;

/** The telemetry part of an inventory: what a heartbeat carries. */
export function telemetryOf(inventory: NodeInventory): Telemetry {
  return {
    cards: inventory.gpu.cards.map((c) => ({
      index: c.index,
      memory_used_mib: c.memory_used_mib,
      ...(c.temperature_c === undefined ? {} : { temperature_c: c.temperature_c }),
      ...(c.power_w === undefined ? {} : { power_w: c.power_w }),
      ...(c.utilization_pct === undefined ? {} : { utilization_pct: c.utilization_pct }),
      processes: c.processes,
      instances: c.instances.map((i) => ({
        index: i.index,
        memory_used_mib: i.memory_used_mib,
        processes: i.processes,
      })),
    })),
    memory_free_mib: inventory.host.memory.free_mib,
    disk_free_mib: inventory.host.disk.free_mib,
  };
}

/** An inventory with a heartbeat's values applied. */
export function withTelemetry(inventory: NodeInventory, t: Telemetry): NodeInventory {
  const byIndex = new Map(t.cards.map((c) => [c.index, c]));
  return {
    ...inventory,
    host: {
      ...inventory.host,
      memory: { ...inventory.host.memory, free_mib: t.memory_free_mib },
      disk: { ...inventory.host.disk, free_mib: t.disk_free_mib },
    },
    gpu: {
      ...inventory.gpu,
      cards: inventory.gpu.cards.map((card) => {
        const c = byIndex.get(card.index);
        if (c === undefined) return card;
        const instances = new Map(c.instances.map((i) => [i.index, i]));
        const { temperature_c: _t, power_w: _p, utilization_pct: _u, ...rest } = card;
        return {
          ...rest,
          memory_used_mib: c.memory_used_mib,
          ...(c.temperature_c === undefined ? {} : { temperature_c: c.temperature_c }),
          ...(c.power_w === undefined ? {} : { power_w: c.power_w }),
          ...(c.utilization_pct === undefined ? {} : { utilization_pct: c.utilization_pct }),
          processes: c.processes,
          instances: card.instances.map((i) => {
            const u = instances.get(i.index);
            return u === undefined ? i : { ...i, memory_used_mib: u.memory_used_mib, processes: u.processes };
          }),
        };
      }),
    },
  };
}

/** The parts of an inventory that change only when the machine does (cards, MIG layout, driver, CPUs). */
export function structureOf(inventory: NodeInventory): string {
  const { gpu, host, agent_version } = inventory;
  return JSON.stringify({
    address: inventory.address,
    engine_proxy: inventory.engine_proxy,
    agent_version,
    host: { hostname: host.hostname, cpus: host.cpus, total: host.memory.total_mib, disk: host.disk.path },
    gpu: {
      method: gpu.method,
      reasons: gpu.reasons,
      driver: gpu.driver_version,
      cuda: gpu.cuda_version,
      cards: gpu.cards.map((c) => ({
        i: c.index,
        u: c.uuid,
        n: c.name,
        c: c.class,
        m: c.mig,
        t: c.memory_total_mib,
        w: c.wear,
        s: c.instances.map((x) => [x.index, x.uuid, x.profile]),
      })),
    },
  });
}
