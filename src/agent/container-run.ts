import { join } from 'node:path';

import { isCpuProfile, type ProfileSpec } from '../catalog/model-spec.js';
import type { ContainersSettings } from '../config/schema.js';
import { chooseImage } from '../engines/container-images.js';
import type { Weights } from '../engines/types.js';
import type { Device } from '../gpu/types.js';
import type { AssignedShard, EngineSettingsWire } from '../protocol/agent-protocol.js';

import { containerHash } from './shards/container/requests.js';
import { containerLabels, type ContainerMount, type GpuRequestKind } from './shards/container/types.js';
import type { ShardRun } from './shards/types.js';

/** What the node says of its containers: `agent.containers`, how GPUs reach them, its id. */
export interface NodeContainers {
  settings: ContainersSettings | undefined;
  gpuRequest: GpuRequestKind | undefined;
  /** The `llmgw.node` label: this node's id, the same across agent restarts (for adoption). */
  nodeId: string;
  /** The agent's data directory: fetched model files are under its `models/`. */
  dataDir: string;
}

/** The shard whose run becomes a container. */
export interface ContainerShard {
  shard: AssignedShard;
  profile: ProfileSpec;
  engines: EngineSettingsWire;
  weights: Weights;
  devices: readonly Device[];
  bindHost: string;
  /** A single-node replica: its port published on bridge networking; else the node's network. */
  bridge: boolean;
}

/**
 * The container a shard runs as: the engine's image, its devices by UUID, the model's
 * files read-only at the same path, the port published on the node's address (or the
 * node's network for multi-node ranks), and llmgw's labels.
 */
export function containerRun(run: ShardRun, c: ContainerShard, node: NodeContainers): ShardRun {
  const settings = node.settings;
  const engine = c.profile.engine;
  // One key per engine in the settings; an engine's name is any string the registry knows.
  const images: Readonly<Record<string, string | undefined>> | undefined = settings?.images;
  const image = chooseImage({
    engine,
    profileImage: c.profile.image,
    settingsImage: images?.[engine],
    gpu: !isCpuProfile(c.profile),
    llamaBuild: c.engines.llamacpp.build,
    registry: settings?.registry,
  });
  const fetched = c.shard.origin !== undefined && c.shard.origin.kind !== 'path';
  const mounts = containerMounts([
    // Fetched files are in the agent's cache (HF_HUB_CACHE, HF_HOME); a local model is where it is.
    ...(fetched ? [join(node.dataDir, 'models')] : [c.weights.path]),
    ...(c.weights.projector === undefined ? [] : [c.weights.projector]),
    ...c.profile.adapters.map((a) => a.path),
  ]);
  const container: NonNullable<ShardRun['container']> = {
    image,
    pull: settings?.pull ?? 'missing',
    gpus: c.devices.map((d) => d.uuid),
    gpuRequest: node.gpuRequest ?? (settings?.gpus === 'cdi' ? 'cdi' : 'nvidia'),
    mounts,
    network: c.bridge ? 'bridge' : 'host',
    ...(c.bridge ? { publish: { hostIp: c.bindHost, port: c.shard.port } } : {}),
    ipc:
      (settings?.ipc ?? 'host') === 'host'
        ? 'host'
        : { shmBytes: Math.round((settings?.shm_size_gb ?? 16) * 1e9) },
    labels: {},
  };
  const hash = containerHash({ ...run, container });
  return {
    ...run,
    container: {
      ...container,
      labels: {
        [containerLabels.shard]: run.key,
        [containerLabels.replica]: run.replica,
        [containerLabels.node]: node.nodeId,
        [containerLabels.hash]: hash,
      },
    },
  };
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
