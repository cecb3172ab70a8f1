/**
 * An engine run as a container instead of a host process: what the agent hands the
 * container supervisor for one shard, beside the ProcessSpec the engine module made (its
 * command line is the container's entrypoint and arguments). Everything here is decided
 * by the agent (shard-executor) from the profile and `agent.containers` settings; the
 * container supervisor only turns it into the daemon's own API calls.
 */

/** Which daemon API the node speaks: Docker Engine's, or Podman's own (libpod). */
export type DaemonKind = 'docker' | 'podman';

/**
 * How GPUs reach the container, always by UUID (a whole card's `GPU-…` or a MIG
 * instance's `MIG-…`): Docker's `DeviceRequests` with the `nvidia` driver (NVIDIA
 * Container Toolkit's runtime hook), or CDI device names `nvidia.com/gpu=<UUID>` where the
 * daemon resolves CDI specs (Podman; Docker 25+ with CDI enabled).
 */
export type GpuRequestKind = 'nvidia' | 'cdi';

export interface ContainerMount {
  /** On the node. */
  source: string;
  /** In the container: the same path as on the node, so engine arguments need no rewriting. */
  target: string;
  readOnly: boolean;
}

export interface ContainerRun {
  /** `vllm/vllm-openai:v0.15.1`: pulled when missing (per `pull`). */
  image: string;
  pull: 'missing' | 'always' | 'never';
  /** CUDA UUIDs of the shard's devices; empty on a CPU placement. */
  gpus: string[];
  gpuRequest: GpuRequestKind;
  /** Model files (read-only) and anything else the engine reads, bind-mounted at the same path. */
  mounts: ContainerMount[];
  /**
   * `host`: the node's network namespace (multi-node ranks reach each other as on the host);
   * `bridge`: the engine's port published on `publish.hostIp`.
   */
  network: 'host' | 'bridge';
  /** Bridge networking: the engine's port inside, published on the node's address at the same port. */
  publish?: { hostIp: string; port: number };
  /** `host`: the host's IPC namespace (NCCL, PyTorch's shared memory); else a private /dev/shm this size. */
  ipc: 'host' | { shmBytes: number };
  /** llmgw's labels: `llmgw.shard` (replica/rank), `llmgw.node`, `llmgw.hash` (of what it runs), `llmgw.replica`. */
  labels: Record<string, string>;
}

/** Label keys every llmgw container carries (a container without `llmgw.node` is never ours). */
export const containerLabels = {
  shard: 'llmgw.shard',
  replica: 'llmgw.replica',
  node: 'llmgw.node',
  hash: 'llmgw.hash',
} as const;
