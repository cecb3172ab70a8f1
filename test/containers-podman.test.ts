import { afterAll, describe, expect, it } from 'vitest';

import { ContainerSupervisor } from '../src/agent/shards/container/container-supervisor.js';
import { gpuRequestFor, probeDaemon } from '../src/agent/container-daemon.js';
import { DaemonClient } from '../src/agent/shards/container/daemon.js';
import type { ShardRun, ShardStatus } from '../src/agent/shards/types.js';
import { startFakePodman } from './fakes/podman-api.js';
import { freePort } from './fakes/engines/fake-engines.js';
import { until } from './support/timing.js';

/** The container supervisor speaking Podman's own API (libpod paths and a SpecGenerator), against a fake of it. */

const fake = await startFakePodman();
afterAll(() => fake.close());

const mig = 'MIG-0d1e2f3a-4b5c-5d6e-9f0a-1b2c3d4e5f6a';

describe('the container supervisor on Podman (libpod API)', () => {
  it('pulls with a downloading state, creates by libpod paths with CDI devices, follows logs, and removes at scale 0', async () => {
    const client = await DaemonClient.connect(fake.host, 'auto');
    expect(client.kind).toBe('podman');
    const port = await freePort();
    const run: ShardRun = {
      key: 'tiny-1/0',
      replica: 'tiny-1',
      rank: 0,
      processes: [
        { name: 'vllm', bin: 'vllm', args: ['serve', '/models/m', '--port', String(port)], env: {} },
      ],
      container: {
        image: 'docker.io/vllm/vllm-openai:v0.15.1',
        pull: 'missing',
        gpus: [mig],
        gpuRequest: 'cdi',
        mounts: [{ source: '/models/m', target: '/models/m', readOnly: true }],
        network: 'bridge',
        publish: { hostIp: '127.0.0.1', port },
        ipc: 'host',
        labels: {},
      },
      health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections' },
      stopGraceMs: 5000,
    };
    const seen: ShardStatus[] = [];
    const sup = new ContainerSupervisor({
      client,
      node: 'node-p',
      onStatus: (s) => seen.push(s),
      healthIntervalMs: 50,
    });
    sup.apply([run]);
    const deadline = Date.now() + 5000;
    while (seen.at(-1)?.state !== 'ready' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(seen.at(-1)).toMatchObject({ state: 'ready', pid: 4242, restarts: 0 });
    expect(seen.find((s) => s.state === 'downloading')).toMatchObject({
      reason: 'pulling image docker.io/vllm/vllm-openai:v0.15.1',
      download: { done: 0, total: 0, rate_bps: 0 },
    });
    expect(sup.logs('tiny-1/0')).toEqual(['hello from the fake podman']);

    const paths = fake.requests.map((r) => `${r.method} ${r.url.replace(/[0-9a-f]{64}/, 'ID')}`);
    expect(paths).toContain(
      'POST /v4.0.0/libpod/images/pull?reference=docker.io%2Fvllm%2Fvllm-openai%3Av0.15.1&policy=always',
    );
    const create = fake.requests.find((r) => r.url === '/v4.0.0/libpod/containers/create');
    expect(create?.body).toMatchObject({
      image: 'docker.io/vllm/vllm-openai:v0.15.1',
      entrypoint: ['vllm'],
      devices: [{ path: `nvidia.com/gpu=${mig}` }],
      ipcns: { nsmode: 'host' },
      netns: { nsmode: 'bridge' },
      portmappings: [{ host_ip: '127.0.0.1', host_port: port, container_port: port, protocol: 'tcp' }],
      restart_policy: 'no',
      labels: { 'llmgw.node': 'node-p', 'llmgw.shard': 'tiny-1/0' },
    });
    expect(paths).toContain('POST /v4.0.0/libpod/containers/ID/start');
    expect(paths).toContain('POST /v4.0.0/libpod/containers/ID/wait');

    sup.apply([]);
    await sup.stopped();
    const after = fake.requests.map((r) => `${r.method} ${r.url.replace(/[0-9a-f]{64}/, 'ID')}`);
    expect(after).toContain('POST /v4.0.0/libpod/containers/ID/stop?timeout=5');
    expect(after).toContain('DELETE /v4.0.0/libpod/containers/ID?force=true&v=true');
    expect(fake.containers.size).toBe(0);
    await sup.stopAll();
  });
  it('holds a GPU container degraded while its processes hold no memory on its GPU, ready once they do', async () => {
    // The container's State.Pid is a host pid: this test's own process stands for the engine.
    const gpuFake = await startFakePodman({
      images: ['docker.io/vllm/vllm-openai:v0.15.1'],
      pid: process.pid,
    });
    const port = await freePort();
    let holders: number[] = [];
    const seen: ShardStatus[] = [];
    const sup = new ContainerSupervisor({
      client: await DaemonClient.connect(gpuFake.host, 'podman'),
      node: 'node-g',
      onStatus: (s) => seen.push(s),
      healthIntervalMs: 50,
      gpuProcesses: () => Promise.resolve(new Map([[mig, holders]])),
      gpuCheckDelayMs: 50,
      gpuCheckIntervalMs: 50,
    });
    try {
      sup.apply([
        {
          key: 'gpu-1/0',
          replica: 'gpu-1',
          rank: 0,
          processes: [{ name: 'vllm', bin: 'vllm', args: ['serve', '/models/m'], env: {} }],
          container: {
            image: 'docker.io/vllm/vllm-openai:v0.15.1',
            pull: 'missing',
            gpus: [mig],
            gpuRequest: 'cdi',
            mounts: [],
            network: 'bridge',
            publish: { hostIp: '127.0.0.1', port },
            ipc: 'host',
            labels: {},
          },
          health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections' },
          gpu: { uuids: [mig] },
          stopGraceMs: 5000,
        },
      ]);
      const reached = (state: string): Promise<ShardStatus> =>
        until(`the shard ${state}`, () => (seen.at(-1)?.state === state ? seen.at(-1) : undefined), 5000, {
          detail: () => ` (last seen: ${seen.at(-1)?.state ?? 'nothing'})`,
        });
      expect(await reached('degraded')).toMatchObject({
        state: 'degraded',
        reason:
          `the engine holds no memory on its GPU (${mig}): it is running on the CPU, about ten times slower — ` +
          "use the image's GPU variant (llama.cpp: a server-cuda tag), or check the NVIDIA Container Toolkit " +
          '(`docker run --rm --gpus all IMAGE nvidia-smi` should list the card)',
      });
      expect(seen.some((s) => s.state === 'ready')).toBe(true);
      holders = [process.pid];
      expect(await reached('ready')).toMatchObject({ state: 'ready', pid: process.pid, restarts: 0 });
    } finally {
      sup.apply([]);
      await sup.stopped();
      await sup.stopAll();
      await gpuFake.close();
    }
  });
});

describe('probeDaemon', () => {
  it('takes agent.containers.host, then DOCKER_HOST, and refuses a daemon of the other kind', async () => {
    expect((await probeDaemon({ runtime: 'auto', host: fake.host }, {})).kind).toBe('podman');
    expect((await probeDaemon({ runtime: 'podman', host: '' }, { DOCKER_HOST: fake.host })).kind).toBe(
      'podman',
    );
    await expect(probeDaemon({ runtime: 'docker', host: fake.host }, {})).rejects.toThrow(
      'it is Podman, but agent.containers.runtime is docker: set it to podman or auto',
    );
  });

  it('says which sockets it tried when none answers', async () => {
    await expect(
      probeDaemon({ runtime: 'podman', host: '' }, { XDG_RUNTIME_DIR: '/nonexistent' }),
    ).rejects.toThrow(
      /^no usable container daemon at unix:\/\/\/run\/podman\/podman.sock \(Podman's socket: .*\), unix:\/\/\/nonexistent\/podman\/podman.sock \(Podman's user socket: .*\): start Docker or Podman/,
    );
  });

  it('takes CDI for gpus: auto on Podman', async () => {
    expect(gpuRequestFor('auto', await probeDaemon({ runtime: 'auto', host: fake.host }, {}))).toBe('cdi');
  });
});
