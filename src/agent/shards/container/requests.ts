import { createHash } from 'node:crypto';

import { runHash, stableJson } from '../run-hash.js';
import type { ShardRun } from '../types.js';
import { containerLabels, type ContainerRun, type DaemonKind } from './types.js';

/**
 * The daemon requests that make a shard's container, as pure functions of the run: the
 * Docker Engine API's `POST /containers/create` body, and Podman's libpod SpecGenerator
 * (`POST /libpod/containers/create`). Everything the daemon is told is here, so the
 * tests can hold the exact JSON per daemon kind.
 */

/** A run that cannot become a container as it stands: a fault of the run or the settings, not worth retrying. */
export class ContainerRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContainerRefusal';
  }
}

/** What makes the container what it is: the run's processes, health and GPUs, and its container settings. */
export function containerHash(run: ShardRun): string {
  const container = run.container === undefined ? undefined : { ...run.container, labels: undefined };
  return createHash('sha256')
    .update(`${runHash(run)}\n${stableJson(container)}`)
    .digest('hex')
    .slice(0, 32);
}

/** Everything one container is made of, checked; the same for both daemons. */
export interface ContainerSpec {
  /** `llmgw-<replica>-r<rank>-<hash>`: readable in `docker ps`, unique per attempt. */
  name: string;
  image: string;
  entrypoint: string[];
  args: string[];
  env: Record<string, string>;
  labels: Record<string, string>;
  container: ContainerRun;
}

/**
 * Checks a run and names what goes into its container. Refused (ContainerRefusal): a run
 * without `container`, more or fewer than one process, more than one MIG instance (one
 * MIG instance per engine: CUDA sees only the first of several), bridge networking with
 * nothing to publish.
 */
export function containerSpec(run: ShardRun, options: { node: string; attempt: string }): ContainerSpec {
  const container = run.container;
  if (container === undefined) throw new ContainerRefusal(`shard ${run.key} is not a container run`);
  const [process, ...more] = run.processes;
  if (process === undefined)
    throw new ContainerRefusal('the shard has no process to run: its engine gave no command');
  if (more.length > 0)
    throw new ContainerRefusal(
      `the engine gave ${run.processes.length} processes for shard ${run.key}; a container runs one (run this profile as processes)`,
    );
  const mig = container.gpus.filter((u) => u.startsWith('MIG-'));
  if (mig.length > 1)
    throw new ContainerRefusal(
      `shard ${run.key} asks for ${mig.length} MIG instances (${mig.join(', ')}); an engine uses one MIG instance (CUDA sees only the first), so place it on one instance or on whole cards`,
    );
  if (container.network === 'bridge' && container.publish === undefined)
    throw new ContainerRefusal(
      `shard ${run.key} runs with bridge networking but publishes no port; give it the engine's port or use host networking`,
    );
  const hash = containerHash(run);
  return {
    name: `llmgw-${`${run.replica}-r${run.rank}`.replace(/[^A-Za-z0-9_.-]/g, '_')}-${options.attempt}`,
    image: container.image,
    entrypoint: [process.bin],
    args: process.args,
    env: process.env,
    labels: {
      ...container.labels,
      [containerLabels.shard]: run.key,
      [containerLabels.replica]: run.replica,
      [containerLabels.node]: options.node,
      [containerLabels.hash]: hash,
    },
    container,
  };
}

/** The CDI name of a GPU or MIG instance, by UUID, as NVIDIA's CDI spec (`nvidia-ctk cdi generate`) lists it. */
export function cdiDevice(uuid: string): string {
  return `nvidia.com/gpu=${uuid}`;
}

export interface CreateRequest {
  path: string;
  query: Record<string, string>;
  body: Record<string, unknown>;
}

export function createRequest(kind: DaemonKind, spec: ContainerSpec): CreateRequest {
  return kind === 'podman' ? podmanCreate(spec) : dockerCreate(spec);
}

/** Docker Engine API `POST /containers/create?name=…`: the same body from API 1.41 to 1.52 (see api-version.ts). */
export function dockerCreate(spec: ContainerSpec): CreateRequest {
  const c = spec.container;
  const host: Record<string, unknown> = {
    // Mounts, not Binds: a missing source is an error instead of an empty directory made as root.
    Mounts: c.mounts.map((m) => ({ Type: 'bind', Source: m.source, Target: m.target, ReadOnly: m.readOnly })),
    NetworkMode: c.network,
    // The agent restarts engines itself, with its backoff and its reports.
    RestartPolicy: { Name: 'no' },
  };
  const body: Record<string, unknown> = {
    Image: spec.image,
    Entrypoint: spec.entrypoint,
    Cmd: spec.args,
    Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
    Labels: spec.labels,
  };
  if (c.network === 'bridge' && c.publish !== undefined) {
    const port = `${c.publish.port}/tcp`;
    body['ExposedPorts'] = { [port]: {} };
    host['PortBindings'] = { [port]: [{ HostIp: c.publish.hostIp, HostPort: String(c.publish.port) }] };
  }
  if (c.ipc === 'host') host['IpcMode'] = 'host';
  else host['ShmSize'] = c.ipc.shmBytes;
  if (c.gpus.length > 0) {
    host['DeviceRequests'] = [
      c.gpuRequest === 'cdi'
        ? { Driver: 'cdi', DeviceIDs: c.gpus.map(cdiDevice) }
        : { Driver: 'nvidia', DeviceIDs: c.gpus, Capabilities: [['gpu']] },
    ];
  }
  body['HostConfig'] = host;
  return { path: '/containers/create', query: { name: spec.name }, body };
}

/**
 * Podman's libpod `POST /libpod/containers/create` (a SpecGenerator). GPUs go as CDI
 * devices: libpod has no DeviceRequests, and Podman resolves `nvidia.com/gpu=<UUID>` from
 * the CDI spec in /etc/cdi or /var/run/cdi.
 */
export function podmanCreate(spec: ContainerSpec): CreateRequest {
  const c = spec.container;
  if (c.gpus.length > 0 && c.gpuRequest !== 'cdi')
    throw new ContainerRefusal(
      'Podman passes GPUs as CDI devices only; set agent.containers.gpus to cdi (or auto) and generate the spec with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`',
    );
  const body: Record<string, unknown> = {
    name: spec.name,
    image: spec.image,
    entrypoint: spec.entrypoint,
    command: spec.args,
    env: spec.env,
    labels: spec.labels,
    mounts: c.mounts.map((m) => ({
      destination: m.target,
      source: m.source,
      type: 'bind',
      options: m.readOnly ? ['ro'] : [],
    })),
    netns: { nsmode: c.network },
    restart_policy: 'no',
  };
  if (c.network === 'bridge' && c.publish !== undefined)
    body['portmappings'] = [
      {
        host_ip: c.publish.hostIp,
        host_port: c.publish.port,
        container_port: c.publish.port,
        protocol: 'tcp',
      },
    ];
  if (c.ipc === 'host') body['ipcns'] = { nsmode: 'host' };
  else body['shm_size'] = c.ipc.shmBytes;
  if (c.gpus.length > 0) body['devices'] = c.gpus.map((u) => ({ path: cdiDevice(u) }));
  return { path: '/containers/create', query: {}, body };
}

/** `name` and `tag` for Docker's `POST /images/create` (a digest goes as the tag; no tag means latest, never all tags). */
export function splitImageRef(ref: string): { fromImage: string; tag: string } {
  const at = ref.indexOf('@');
  if (at >= 0) return { fromImage: ref.slice(0, at), tag: ref.slice(at + 1) };
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon > slash) return { fromImage: ref.slice(0, colon), tag: ref.slice(colon + 1) };
  return { fromImage: ref, tag: 'latest' };
}
