import { describe, expect, it } from 'vitest';

import { chooseApiVersion, compareVersions, isVersionRefused, type DaemonApi } from './api-version.js';
import { daemonApi } from './daemon.js';

const docker = (version: string, apiVersion?: string, minApiVersion?: string): DaemonApi => ({
  kind: 'docker',
  version,
  apiVersion,
  minApiVersion,
});

describe('chooseApiVersion', () => {
  it.each([
    ['Debian 12 Docker 20.10', docker('20.10.24+dfsg1', '1.41', '1.12'), '1.41'],
    ['Docker 24', docker('24.0.7', '1.43', '1.12'), '1.43'],
    ['Docker 27', docker('27.5.1', '1.47', '1.24'), '1.47'],
    ['Docker 29', docker('29.0.4', '1.52', '1.44'), '1.52'],
    ['a Docker newer than llmgw knows', docker('30.1.0', '1.56', '1.44'), '1.52'],
    ['a daemon that names no API version', docker('20.10.5'), '1.41'],
    [
      'Podman 5',
      { kind: 'podman', version: '5.2.2', apiVersion: '5.2.2', minApiVersion: undefined },
      '4.0.0',
    ],
    [
      'Podman 4.0',
      { kind: 'podman', version: '4.0.0', apiVersion: '4.0.0', minApiVersion: undefined },
      '4.0.0',
    ],
  ] as const)('%s: %s', (_, api, want) => {
    expect(chooseApiVersion(api)).toBe(want);
  });

  it.each([
    [
      docker('19.03.15', '1.40', '1.12'),
      "Docker 19.03.15 speaks Docker API 1.40 at most, older than llmgw's 1.41 to 1.52: upgrade Docker to 20.10 or later (API 1.41), or run this profile as a process",
    ],
    [
      docker('31.0.0', '1.60', '1.53'),
      "Docker 31.0.0 accepts Docker API 1.53 and later only, newer than llmgw's 1.41 to 1.52: upgrade llmgw to a release that speaks API 1.53, or run a Docker that still accepts API 1.52 (Docker 29 does)",
    ],
    [
      { kind: 'podman', version: '3.4.4', apiVersion: '3.4.4', minApiVersion: undefined },
      'Podman 3.4.4 speaks libpod API 3.4.4, older than the 4.0.0 llmgw speaks: upgrade Podman to 4.0 or later (Debian 12 and Ubuntu 22.04 ship it), or run this profile as a process',
    ],
  ] as const)('refuses %o in words', (api, message) => {
    expect(() => chooseApiVersion(api)).toThrow(message);
  });
});

describe('version answers', () => {
  it('compares part by part, numerically', () => {
    expect(compareVersions('1.52', '1.44')).toBeGreaterThan(0);
    expect(compareVersions('1.9', '1.41')).toBeLessThan(0);
    expect(compareVersions('4.0', '4.0.0')).toBe(0);
  });

  it("knows Docker's refusal of a client version, too old or too new", () => {
    expect(
      isVersionRefused(
        400,
        'client version 1.41 is too old. Minimum supported API version is 1.44, please upgrade your client to a newer version',
      ),
    ).toBe(true);
    expect(
      isVersionRefused(400, 'client version 1.53 is too new. Maximum supported API version is 1.52'),
    ).toBe(true);
    expect(isVersionRefused(400, 'invalid reference format')).toBe(false);
    expect(isVersionRefused(500, 'client version 1.41 is too old')).toBe(false);
  });

  it("reads Docker's ApiVersion and MinAPIVersion, and Podman's libpod version from its ping", () => {
    expect(
      daemonApi({
        Version: '29.0.4',
        ApiVersion: '1.52',
        MinAPIVersion: '1.44',
        Components: [{ Name: 'Engine' }],
      }),
    ).toEqual({ kind: 'docker', version: '29.0.4', apiVersion: '1.52', minApiVersion: '1.44' });
    expect(
      daemonApi(
        { Version: '5.2.2', ApiVersion: '1.41', Components: [{ Name: 'Podman Engine', Version: '5.2.2' }] },
        '5.2.2',
      ),
    ).toEqual({ kind: 'podman', version: '5.2.2', apiVersion: '5.2.2', minApiVersion: undefined });
  });
});
