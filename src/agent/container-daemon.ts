import { request } from 'node:http';
import { join } from 'node:path';

import type { ContainersSettings } from '../config/schema.js';
import { messageOf } from '../core/errors.js';

import { chooseApiVersion } from './shards/container/api-version.js';
import type { DaemonKind, GpuRequestKind } from './shards/container/types.js';

/**
 * Which container daemon this node's agent talks to, and what it says of itself: its
 * address (`agent.containers.host`, else DOCKER_HOST, else the usual sockets), whether it
 * is Docker or Podman, its version, and how it can hand GPUs to containers (the nvidia
 * runtime of the NVIDIA Container Toolkit, or CDI). Used by the agent before it makes its
 * container supervisor, and by `llmgw doctor`.
 */

/** Written in the agent's data dir once it ran a container: its next start, and the doctor, look for the daemon. */
export const containersUsedFile = 'containers-used';

/** Where a daemon may listen: `unix:///var/run/docker.sock`, `tcp://10.0.0.5:2375`. */
export interface DaemonAddress {
  url: string;
  /** What named it, for messages: the setting, DOCKER_HOST, or the usual socket. */
  from: string;
}

export interface DaemonInfo {
  address: DaemonAddress;
  kind: DaemonKind;
  version: string;
  /** Docker: the API version the agent speaks to it (negotiated); Podman: its libpod API version. */
  apiVersion: string;
  /** Runtimes the daemon lists (/info Runtimes): `nvidia` is the NVIDIA Container Toolkit's. */
  runtimes: string[];
  /** Whether it resolves CDI device names: Podman always; Docker 25+ with CDI enabled (/info CDISpecDirs). */
  cdi: boolean;
}

/** The addresses to try, in order. */
export function daemonAddresses(
  settings: Pick<ContainersSettings, 'runtime' | 'host'>,
  env: NodeJS.ProcessEnv,
): DaemonAddress[] {
  if (settings.host !== '') return [{ url: settings.host, from: 'agent.containers.host' }];
  const dockerHost = env['DOCKER_HOST'];
  if (dockerHost !== undefined && dockerHost !== '') return [{ url: dockerHost, from: 'DOCKER_HOST' }];
  const xdg = env['XDG_RUNTIME_DIR'];
  const docker = [{ url: 'unix:///var/run/docker.sock', from: "Docker's socket" }];
  const podman = [
    { url: 'unix:///run/podman/podman.sock', from: "Podman's socket" },
    ...(xdg === undefined || xdg === ''
      ? []
      : [
          {
            url: `unix://${join(xdg, 'podman', 'podman.sock')}`,
            from: "Podman's user socket",
          },
        ]),
  ];
  if (settings.runtime === 'docker') return docker;
  if (settings.runtime === 'podman') return podman;
  return [...docker, ...podman];
}

/** GET `path` of the daemon at `url`; its status, headers and body. */
export function daemonGet(
  url: string,
  path: string,
  timeoutMs = 3000,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const target = url.startsWith('unix://')
    ? { socketPath: url.slice('unix://'.length) }
    : (() => {
        const u = new URL(url.replace(/^tcp:/, 'http:'));
        return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 2375) };
      })();
  return new Promise((resolve, reject) => {
    const req = request({ ...target, path, method: 'GET', timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * The first daemon that answers /_ping, with what /version and /info say. Rejects, naming
 * every address tried and why each failed, and what to set.
 */
export async function probeDaemon(
  settings: Pick<ContainersSettings, 'runtime' | 'host'>,
  env: NodeJS.ProcessEnv,
  timeoutMs = 3000,
): Promise<DaemonInfo> {
  const tried: string[] = [];
  for (const address of daemonAddresses(settings, env)) {
    try {
      const ping = await daemonGet(address.url, '/_ping', timeoutMs);
      if (ping.status !== 200) throw new Error(`GET /_ping answered ${ping.status}`);
      const version = JSON.parse((await daemonGet(address.url, '/version', timeoutMs)).body) as {
        Version?: string;
        ApiVersion?: string;
        MinAPIVersion?: string;
        Components?: { Name?: string }[];
      };
      const info = JSON.parse((await daemonGet(address.url, '/info', timeoutMs)).body) as {
        Runtimes?: Record<string, unknown>;
        CDISpecDirs?: string[] | null;
      };
      const podman =
        ping.headers['libpod-api-version'] !== undefined ||
        (version.Components ?? []).some((c) => /podman/i.test(c.Name ?? ''));
      const kind: DaemonKind = podman ? 'podman' : 'docker';
      if (settings.runtime !== 'auto' && settings.runtime !== kind)
        throw new Error(
          `it is ${kind === 'podman' ? 'Podman' : 'Docker'}, but agent.containers.runtime is ${settings.runtime}: set it to ${kind} or auto, or point agent.containers.host at the ${settings.runtime} socket`,
        );
      // Podman's /version gives its Docker-compatible API version; the agent speaks libpod's.
      const libpod = podman ? headerText(ping.headers['libpod-api-version']) : undefined;
      // Refused, in words, where the daemon and the agent share no API version.
      const spoken = chooseApiVersion({
        kind,
        version: version.Version ?? '',
        apiVersion: podman ? libpod : version.ApiVersion,
        minApiVersion: podman ? undefined : version.MinAPIVersion,
      });
      return {
        address,
        kind,
        version: version.Version ?? 'unknown',
        // Docker: the version the agent would speak; Podman: the daemon's libpod API.
        apiVersion: libpod ?? spoken,
        runtimes: Object.keys(info.Runtimes ?? {}).sort(),
        cdi: podman || (Array.isArray(info.CDISpecDirs) && info.CDISpecDirs.length > 0),
      };
    } catch (e) {
      tried.push(`${address.url} (${address.from}: ${messageOf(e)})`);
    }
  }
  throw new Error(
    `no usable container daemon at ${tried.join(', ')}: start Docker or Podman (its API socket: systemctl start docker, or systemctl start podman.socket), or set agent.containers.host (or DOCKER_HOST) to where it listens`,
  );
}

/**
 * How GPUs reach this daemon's containers: as set; else CDI on Podman; on Docker the
 * nvidia runtime's device requests, unless the daemon reports CDI and lists no nvidia
 * runtime (Docker 27 reports CDI spec directories whether or not NVIDIA's spec is in them,
 * so CDI alone does not say the GPUs are there).
 */
export function gpuRequestFor(
  setting: ContainersSettings['gpus'],
  daemon: Pick<DaemonInfo, 'kind' | 'cdi' | 'runtimes'>,
): GpuRequestKind {
  if (setting !== 'auto') return setting;
  if (daemon.kind === 'podman') return 'cdi';
  return daemon.cdi && !daemon.runtimes.includes('nvidia') ? 'cdi' : 'nvidia';
}

function headerText(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
