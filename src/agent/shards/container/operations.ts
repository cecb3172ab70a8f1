import { constants } from 'node:os';
import type { IncomingMessage } from 'node:http';

import { DaemonError, type DaemonClient } from './daemon.js';
import { createRequest, type ContainerSpec } from './requests.js';
import { containerLabels } from './types.js';

/**
 * The container calls the supervisor makes, for Docker and Podman alike: the paths are
 * the same under each API's prefix (`/v1.52` or the version negotiated, `/v4.0.0/libpod`); the bodies and a few
 * answers differ.
 */

export interface ListedContainer {
  id: string;
  labels: Record<string, string>;
  running: boolean;
  name: string;
}

/** This node's llmgw containers (label `llmgw.node=<node>`), running or not. */
export async function listNodeContainers(client: DaemonClient, node: string): Promise<ListedContainer[]> {
  const list = await client.json<
    { Id: string; Labels?: Record<string, string> | null; State?: unknown; Names?: unknown }[]
  >({
    method: 'GET',
    path: '/containers/json',
    query: { all: true, filters: JSON.stringify({ label: [`${containerLabels.node}=${node}`] }) },
  });
  return list.map((c) => ({
    id: c.Id,
    labels: c.Labels ?? {},
    running: c.State === 'running',
    name: Array.isArray(c.Names) && typeof c.Names[0] === 'string' ? c.Names[0].replace(/^\//, '') : '',
  }));
}

export async function createContainer(client: DaemonClient, spec: ContainerSpec): Promise<string> {
  const req = createRequest(client.kind, spec);
  const res = await client.json<{ Id?: string; id?: string }>({
    method: 'POST',
    path: req.path,
    query: req.query,
    body: req.body,
  });
  const id = res.Id ?? res.id;
  if (id === undefined) throw new Error('the daemon created the container but gave no id');
  return id;
}

export async function startContainer(client: DaemonClient, id: string): Promise<void> {
  await client.call({ method: 'POST', path: `/containers/${id}/start` });
}

export interface Inspected {
  running: boolean;
  pid: number | undefined;
  exitCode: number | undefined;
}

export async function inspectContainer(client: DaemonClient, id: string): Promise<Inspected | undefined> {
  try {
    const c = await client.json<{ State?: { Running?: boolean; Pid?: number; ExitCode?: number } }>({
      method: 'GET',
      path: `/containers/${id}/json`,
    });
    const pid = c.State?.Pid;
    return {
      running: c.State?.Running === true,
      pid: pid === undefined || pid === 0 ? undefined : pid,
      exitCode: c.State?.ExitCode,
    };
  } catch (e) {
    if (e instanceof DaemonError && e.status === 404) return undefined;
    throw e;
  }
}

/**
 * Resolves with the container's exit code once it is not running (`POST /wait`: Docker
 * answers `{"StatusCode": n}`, Podman the bare number); null when it went away unseen.
 */
export async function waitContainer(
  client: DaemonClient,
  id: string,
  signal: AbortSignal,
): Promise<number | null> {
  for (;;) {
    try {
      const res = await client.json<{ StatusCode?: number } | number>({
        method: 'POST',
        path: `/containers/${id}/wait`,
        timeoutMs: 0,
        signal,
      });
      if (typeof res === 'number') return res;
      if (typeof res.StatusCode === 'number') return res.StatusCode;
    } catch (e) {
      if (signal.aborted) throw e;
      if (e instanceof DaemonError && e.status === 404) return null;
      // The daemon restarted or the stream broke: look again.
      const state = await inspectContainer(client, id).catch(() => undefined);
      if (state === undefined) return null;
      if (!state.running) return state.exitCode ?? null;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** `docker stop -t`: SIGTERM (or the image's stop signal), SIGKILL after `graceS`; an exited one is left as it is. */
export async function stopContainer(client: DaemonClient, id: string, graceS: number): Promise<void> {
  const t = Math.max(0, Math.ceil(graceS));
  try {
    await client.call({
      method: 'POST',
      path: `/containers/${id}/stop`,
      query: client.kind === 'podman' ? { timeout: t } : { t },
      timeoutMs: (t + 30) * 1000,
    });
  } catch (e) {
    // 304: not running; 404: gone.
    if (e instanceof DaemonError && (e.status === 304 || e.status === 404)) return;
    throw e;
  }
}

export async function removeContainer(client: DaemonClient, id: string): Promise<void> {
  try {
    await client.call({ method: 'DELETE', path: `/containers/${id}`, query: { force: true, v: true } });
  } catch (e) {
    // Gone already, or being removed by an earlier call.
    if (e instanceof DaemonError && (e.status === 404 || e.status === 409)) return;
    throw e;
  }
}

export function killContainer(client: DaemonClient, id: string, signal = 'SIGKILL'): Promise<unknown> {
  return client.call({ method: 'POST', path: `/containers/${id}/kill`, query: { signal } });
}

/** The container's output, stdout and stderr multiplexed; `tail`: only the last lines so far, then what comes. */
export function followLogs(
  client: DaemonClient,
  id: string,
  options: { tail?: number; signal: AbortSignal },
): Promise<IncomingMessage> {
  return client.open({
    method: 'GET',
    path: `/containers/${id}/logs`,
    query: { follow: true, stdout: true, stderr: true, tail: options.tail ?? 'all' },
    timeoutMs: 0,
    signal: options.signal,
  });
}

/** A container's exit status as a process's: 128 + n is signal n (the daemon's convention, e.g. 137 after `docker kill`). */
export function exitSignal(code: number | null): string | null {
  if (code === null || code <= 128) return null;
  const n = code - 128;
  const name = Object.entries(constants.signals).find(([, v]) => v === n)?.[0];
  return name ?? null;
}

/**
 * The daemon's refusal to give a container its GPUs, in words a user acts on; undefined
 * when the error is another one.
 */
export function gpuRuntimeReason(message: string, kind: 'docker' | 'podman'): string | undefined {
  if (/could not select device driver "nvidia"/.test(message))
    return `this node's Docker has no NVIDIA runtime (the daemon says: ${message}): install the NVIDIA Container Toolkit and run \`nvidia-ctk runtime configure --runtime=docker\`, then restart dockerd; or, where the daemon resolves CDI devices, set agent.containers.gpus: cdi`;
  if (/could not select device driver "cdi"/.test(message))
    return `this node's Docker does not resolve CDI devices (the daemon says: ${message}): Docker 25 or later with CDI enabled is needed (\`"features": {"cdi": true}\` in daemon.json before Docker 28), or set agent.containers.gpus: nvidia with the NVIDIA Container Toolkit's runtime`;
  if (/unresolvable CDI devices|CDI device injection failed/i.test(message))
    return `the ${kind === 'podman' ? 'Podman' : 'Docker'} daemon finds no CDI spec for this node's GPUs (it says: ${message}): generate it with \`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml\` (again after a driver update or a MIG change)`;
  return undefined;
}
