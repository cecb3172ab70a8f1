import type { DaemonKind } from './types.js';

/**
 * Which API version the agent speaks to a daemon, chosen as the Docker CLI chooses it:
 * the highest version both sides speak. Pure, so each refusal is held by a table test.
 *
 * Docker: the range below is what llmgw is tested against, from Debian 12's Docker 20.10
 * (1.41) to Docker 29 (1.52, which refuses clients below 1.44). Every change between them
 * to the calls the agent makes was read against what it sends and reads (the Engine API
 * version history): 1.44 makes read-only bind mounts recursive where the kernel can (what
 * a model mount wants), 1.48 deprecates the progress stream's `error` for `errorDetail`
 * (both are read), 1.52 drops the container-wide MacAddress and the backfill of empty
 * PortBindings (neither is sent). A daemon newer than 1.52 still accepts 1.52.
 *
 * Podman: the libpod paths are `/v4.0.0/libpod/…`, which Podman 4.0 and every later one
 * answers; an older Podman is refused.
 */

/** The Docker Engine API versions llmgw speaks, oldest and newest. */
export const dockerApiRange = { min: '1.41', max: '1.52' } as const;
/** The libpod API version in the agent's Podman paths, and the oldest Podman that has it. */
export const podmanApiVersion = '4.0.0';

/** What a daemon says of its API: `/version`'s ApiVersion and MinAPIVersion, or `/_ping`'s headers. */
export interface DaemonApi {
  kind: DaemonKind;
  /** The daemon's release (`29.0.4`, `5.2.2`), for messages. */
  version: string;
  /** Its newest API version (Docker's ApiVersion; Podman's Libpod-API-Version). */
  apiVersion: string | undefined;
  /** Its oldest (Docker's MinAPIVersion); undefined when it does not say. */
  minApiVersion: string | undefined;
}

/** The daemon's API is outside what llmgw speaks: a fault of the node, not worth retrying quickly. */
export class ApiVersionRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ApiVersionRefusal';
  }
}

/** `1.52` against `1.44`, `4.0.0` against `5.2.2`: numerically, part by part; negative when a < b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map((p) => Number.parseInt(p, 10) || 0);
  const pb = b.split('.').map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

const versionPattern = /^\d+\.\d+(\.\d+)?$/;

/**
 * The API version to put in the agent's paths for this daemon; refused (ApiVersionRefusal)
 * when the daemon and llmgw share none, naming the daemon's versions, llmgw's and what to do.
 */
export function chooseApiVersion(api: DaemonApi): string {
  const name = `${api.kind === 'podman' ? 'Podman' : 'Docker'} ${api.version === '' ? '(version unknown)' : api.version}`;
  if (api.kind === 'podman') {
    // An old Podman that gives no libpod version in its ping: its answers to /v4.0.0 decide.
    if (api.apiVersion === undefined || !versionPattern.test(api.apiVersion)) return podmanApiVersion;
    if (compareVersions(api.apiVersion, podmanApiVersion) < 0)
      throw new ApiVersionRefusal(
        `${name} speaks libpod API ${api.apiVersion}, older than the ${podmanApiVersion} llmgw speaks: upgrade Podman to 4.0 or later (Debian 12 and Ubuntu 22.04 ship it), or run this profile as a process`,
      );
    return podmanApiVersion;
  }
  const { min, max } = dockerApiRange;
  // A daemon that does not say speaks at least the oldest Docker llmgw knows (it answered /version).
  const newest = api.apiVersion !== undefined && versionPattern.test(api.apiVersion) ? api.apiVersion : min;
  const oldest =
    api.minApiVersion !== undefined && versionPattern.test(api.minApiVersion) ? api.minApiVersion : '1.12';
  if (compareVersions(newest, min) < 0)
    throw new ApiVersionRefusal(
      `${name} speaks Docker API ${newest} at most, older than llmgw's ${min} to ${max}: upgrade Docker to 20.10 or later (API ${min}), or run this profile as a process`,
    );
  if (compareVersions(oldest, max) > 0)
    throw new ApiVersionRefusal(
      `${name} accepts Docker API ${oldest} and later only, newer than llmgw's ${min} to ${max}: upgrade llmgw to a release that speaks API ${oldest}, or run a Docker that still accepts API ${max} (Docker 29 does)`,
    );
  return compareVersions(newest, max) < 0 ? newest : max;
}

/**
 * Docker's answer to a version it no longer (or not yet) accepts: `400 client version 1.41
 * is too old. Minimum supported API version is 1.44, …` (or `… is too new. Maximum …`),
 * as after the daemon was upgraded or downgraded under a running agent.
 */
export function isVersionRefused(status: number, message: string): boolean {
  return status === 400 && /client version \S+ is too (old|new)/i.test(message);
}
