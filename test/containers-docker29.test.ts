import { afterEach, describe, expect, it } from 'vitest';

import { probeDaemon } from '../src/agent/container-daemon.js';
import { ContainerSupervisor } from '../src/agent/shards/container/container-supervisor.js';
import { DaemonClient } from '../src/agent/shards/container/daemon.js';
import { listNodeContainers } from '../src/agent/shards/container/operations.js';
import type { ShardRun, ShardStatus } from '../src/agent/shards/types.js';
import { startFakePodman } from './fakes/podman-api.js';
import { docker29, startFakeDocker, type FakeDocker } from './fakes/docker-api.js';
import { freePort } from './fakes/engines/fake-engines.js';
import { until } from './support/timing.js';

/**
 * The container supervisor against a fake of Docker 29 (API 1.52, refusing clients below
 * 1.44, as the real one does), and the API version negotiation: the highest version both
 * sides speak, a renegotiation after the daemon is upgraded under the agent, and the
 * refusal of a daemon outside llmgw's range. test/containers.test.ts runs the same
 * supervisor against this machine's real Docker (Debian's 20.10, API 1.41).
 */

const image = 'vllm/vllm-openai:v0.15.1';
const fakes: FakeDocker[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});
async function fakeDocker(...args: Parameters<typeof startFakeDocker>): Promise<FakeDocker> {
  const f = await startFakeDocker(...args);
  fakes.push(f);
  return f;
}
const paths = (f: FakeDocker) => f.requests.map((r) => `${r.method} ${r.url.replace(/[0-9a-f]{64}/, 'ID')}`);

function shard(port: number): ShardRun {
  return {
    key: 'tiny-1/0',
    replica: 'tiny-1',
    rank: 0,
    processes: [{ name: 'vllm', bin: 'vllm', args: ['serve', '/models/m', '--port', String(port)], env: {} }],
    container: {
      image,
      pull: 'missing',
      gpus: [],
      gpuRequest: 'nvidia',
      mounts: [{ source: '/models/m', target: '/models/m', readOnly: true }],
      network: 'bridge',
      publish: { hostIp: '127.0.0.1', port },
      ipc: 'host',
      labels: {},
    },
    health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections' },
    stopGraceMs: 5000,
  };
}

describe('the container supervisor on Docker 29 (API 1.52, nothing below 1.44)', () => {
  it('negotiates 1.52, then pulls, creates, starts, follows logs, inspects, and removes at scale 0', async () => {
    const fake = await fakeDocker();
    const client = await DaemonClient.connect(fake.host, 'auto');
    expect({ kind: client.kind, version: client.version }).toEqual({ kind: 'docker', version: '29.0.4' });
    const port = await freePort();
    const seen: ShardStatus[] = [];
    const sup = new ContainerSupervisor({
      client,
      node: 'node-d',
      onStatus: (s) => seen.push(s),
      healthIntervalMs: 50,
    });
    try {
      sup.apply([shard(port)]);
      await until('the shard ready', () => (seen.at(-1)?.state === 'ready' ? true : undefined), 5000, {
        detail: () => ` (last seen: ${JSON.stringify(seen.at(-1))})`,
      });
      expect(seen.at(-1)).toMatchObject({ state: 'ready', pid: 4343, restarts: 0 });
      expect(client.apiVersion).toBe('1.52');
      expect(seen.find((s) => s.state === 'downloading')?.reason).toBe(`pulling image ${image}`);
      expect(sup.logs('tiny-1/0')).toEqual(['hello from the fake docker']);

      const create = fake.requests.find((r) => r.url.startsWith('/v1.52/containers/create?name='));
      expect(create?.body).toMatchObject({
        Image: image,
        Entrypoint: ['vllm'],
        HostConfig: {
          Mounts: [{ Type: 'bind', Source: '/models/m', Target: '/models/m', ReadOnly: true }],
          PortBindings: { [`${port}/tcp`]: [{ HostIp: '127.0.0.1', HostPort: String(port) }] },
          IpcMode: 'host',
          RestartPolicy: { Name: 'no' },
        },
        Labels: { 'llmgw.node': 'node-d', 'llmgw.shard': 'tiny-1/0' },
      });
      expect(paths(fake)).toEqual(
        expect.arrayContaining([
          'GET /version',
          `GET /v1.52/images/${image}/json`,
          'POST /v1.52/images/create?fromImage=vllm%2Fvllm-openai&tag=v0.15.1',
          'POST /v1.52/containers/ID/start',
          'GET /v1.52/containers/ID/logs?follow=true&stdout=true&stderr=true&tail=all',
          'GET /v1.52/containers/ID/json',
          'POST /v1.52/containers/ID/wait',
        ]),
      );
    } finally {
      sup.apply([]);
      await sup.stopped();
      await sup.stopAll();
    }
    expect(paths(fake)).toContain('POST /v1.52/containers/ID/stop?t=5');
    expect(paths(fake)).toContain('DELETE /v1.52/containers/ID?force=true&v=true');
    // Every versioned call was at 1.52: none was refused.
    expect(paths(fake).filter((p) => /\/v1\.(3|4[0-3])/.test(p))).toEqual([]);
    expect(fake.containers.size).toBe(0);
  });

  it('speaks the newest a daemon offers up to 1.52: 1.41 to Docker 20.10, 1.47 to Docker 27, 1.52 to a newer one', async () => {
    for (const [versions, want] of [
      [{ version: '20.10.24+dfsg1', apiVersion: '1.41', minApiVersion: '1.12' }, '1.41'],
      [{ version: '27.5.1', apiVersion: '1.47', minApiVersion: '1.24' }, '1.47'],
      [{ version: '30.1.0', apiVersion: '1.56', minApiVersion: '1.44' }, '1.52'],
    ] as const) {
      const fake = await fakeDocker(versions);
      const client = await DaemonClient.connect(fake.host);
      expect(client.apiVersion).toBe(want);
      expect(await listNodeContainers(client, 'n')).toEqual([]);
      expect(paths(fake).at(-1)).toMatch(new RegExp(`^GET /v${want.replace('.', '\\.')}/containers/json`));
    }
  });

  it('asks again once when the daemon, upgraded under the agent, refuses the version it spoke', async () => {
    const fake = await fakeDocker({ version: '24.0.7', apiVersion: '1.43', minApiVersion: '1.12' });
    const client = await DaemonClient.connect(fake.host);
    expect(client.apiVersion).toBe('1.43');
    fake.upgrade(docker29);
    expect(await listNodeContainers(client, 'n')).toEqual([]);
    expect(client.apiVersion).toBe('1.52');
    expect(client.version).toBe('29.0.4');
    expect(paths(fake).slice(-3)).toEqual([
      expect.stringMatching(/^GET \/v1\.43\/containers\/json/),
      'GET /version',
      expect.stringMatching(/^GET \/v1\.52\/containers\/json/),
    ]);
    expect(fake.requests.at(-3)?.url).toMatch(/^\/v1\.43\//);
  });

  it('refuses, in words, a daemon older than API 1.41 and one that no longer accepts 1.52', async () => {
    const old = await fakeDocker({ version: '19.03.15', apiVersion: '1.40', minApiVersion: '1.12' });
    await expect(DaemonClient.connect(old.host)).rejects.toThrow(
      "Docker 19.03.15 speaks Docker API 1.40 at most, older than llmgw's 1.41 to 1.52: upgrade Docker to 20.10 or later (API 1.41), or run this profile as a process",
    );
    // The doctor says the same of it.
    await expect(probeDaemon({ runtime: 'auto', host: old.host }, {})).rejects.toThrow(
      `no usable container daemon at ${old.host} (agent.containers.host: Docker 19.03.15 speaks Docker API 1.40 at most`,
    );
    const future = await fakeDocker({ version: '31.0.0', apiVersion: '1.60', minApiVersion: '1.53' });
    await expect(DaemonClient.connect(future.host)).rejects.toThrow(
      "Docker 31.0.0 accepts Docker API 1.53 and later only, newer than llmgw's 1.41 to 1.52: upgrade llmgw to a release that speaks API 1.53, or run a Docker that still accepts API 1.52 (Docker 29 does)",
    );
  });

  it('the doctor reports the API version the agent speaks to Docker 29', async () => {
    const fake = await fakeDocker();
    const d = await probeDaemon({ runtime: 'docker', host: fake.host }, {});
    expect({ kind: d.kind, version: d.version, api: d.apiVersion }).toEqual({
      kind: 'docker',
      version: '29.0.4',
      api: '1.52',
    });
  });
});

describe('Podman: the libpod version from /libpod/_ping', () => {
  it('speaks /v4.0.0/libpod to Podman 4 and later, and refuses Podman 3 in words', async () => {
    const p5 = await startFakePodman();
    const p3 = await startFakePodman({ apiVersion: '3.4.4' });
    try {
      const client = await DaemonClient.connect(p5.host);
      expect(client.url('/containers/json')).toBe('/v4.0.0/libpod/containers/json');
      expect(p5.requests.map((r) => r.url)).toEqual(['/version', '/libpod/_ping']);
      await expect(DaemonClient.connect(p3.host)).rejects.toThrow(
        'Podman 3.4.4 speaks libpod API 3.4.4, older than the 4.0.0 llmgw speaks: upgrade Podman to 4.0 or later (Debian 12 and Ubuntu 22.04 ship it), or run this profile as a process',
      );
    } finally {
      await p5.close();
      await p3.close();
    }
  });
});
