import { describe, expect, it } from 'vitest';

import { detectDaemon, parseDaemonHost } from './daemon.js';
import { gpuRuntimeReason } from './operations.js';
import { loadHint, PullProgress } from './pull.js';

describe('PullProgress', () => {
  it("sums Docker's per-layer progress into bytes done of total, with a rate and the time left", () => {
    let now = 0;
    const p = new PullProgress(() => now);
    p.take({ status: 'Pulling from vllm/vllm-openai', id: 'v0.15.1' });
    p.take({ status: 'Pulling fs layer', progressDetail: {}, id: 'a' });
    p.take({ status: 'Already exists', progressDetail: {}, id: 'c' });
    p.take({ status: 'Downloading', progressDetail: { current: 1000, total: 4000 }, id: 'a' });
    p.take({ status: 'Downloading', progressDetail: { current: 0, total: 6000 }, id: 'b' });
    expect(p.progress()).toEqual({ done: 1000, total: 10_000, rate_bps: 0 });
    now = 2000;
    p.take({ status: 'Downloading', progressDetail: { current: 3000, total: 6000 }, id: 'b' });
    expect(p.progress()).toEqual({ done: 4000, total: 10_000, rate_bps: 2000, eta_s: 3 });
    now = 3000;
    p.take({ status: 'Download complete', progressDetail: {}, id: 'a' });
    p.take({ status: 'Extracting', progressDetail: { current: 100, total: 4000 }, id: 'a' });
    expect(p.progress().done).toBe(7000);
    p.take({ errorDetail: { message: 'toomanyrequests' }, error: 'toomanyrequests: rate limit' });
    expect(p.error).toBe('toomanyrequests: rate limit');
    // From API 1.48 a daemon may send only errorDetail.
    const q = new PullProgress(() => 0);
    q.take({ errorDetail: { message: 'manifest unknown' } });
    expect(q.error).toBe('manifest unknown');
  });

  it("takes Podman's text lines as status, with no byte counts", () => {
    const p = new PullProgress(() => 0);
    expect(p.take({ stream: 'Copying blob sha256:abc\n' })).toBe(false);
    expect(p.lastStatus).toBe('Copying blob sha256:abc');
    expect(p.progress()).toEqual({ done: 0, total: 0, rate_bps: 0 });
  });
});

describe('daemon addresses and kinds', () => {
  it.each([
    ['unix:///var/run/docker.sock', { socketPath: '/var/run/docker.sock' }],
    ['/run/podman/podman.sock', { socketPath: '/run/podman/podman.sock' }],
    ['tcp://10.0.0.5:2375', { host: '10.0.0.5', port: 2375 }],
    ['tcp://[::1]:2376', { host: '::1', port: 2376 }],
  ])('%s', (host, endpoint) => {
    expect(parseDaemonHost(host)).toEqual(endpoint);
  });

  it('refuses what the agent cannot use', () => {
    expect(() => parseDaemonHost('ssh://me@gpu-1')).toThrow(
      'ssh://me@gpu-1: not a daemon address the agent can use; give unix:///path/to/docker.sock or tcp://host:port',
    );
    expect(() => parseDaemonHost('unix://run/docker.sock')).toThrow('needs an absolute path');
  });

  it('tells Podman by its "Podman Engine" component', () => {
    expect(
      detectDaemon({
        Version: '5.2.2',
        Components: [{ Name: 'Podman Engine', Version: '5.2.2' }, { Name: 'Conmon' }],
      }),
    ).toEqual({ kind: 'podman', version: '5.2.2' });
    expect(
      detectDaemon({
        Version: '20.10.24+dfsg1',
        Components: [{ Name: 'Engine', Version: '20.10.24+dfsg1' }],
      }),
    ).toEqual({ kind: 'docker', version: '20.10.24+dfsg1' });
  });
});

describe('refusals in words', () => {
  it('a missing CDI spec', () => {
    expect(gpuRuntimeReason('unresolvable CDI devices nvidia.com/gpu=GPU-1', 'podman')).toBe(
      "the Podman daemon finds no CDI spec for this node's GPUs (it says: unresolvable CDI devices nvidia.com/gpu=GPU-1): generate it with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (again after a driver update or a MIG change)",
    );
    expect(gpuRuntimeReason('no such image', 'docker')).toBeUndefined();
  });

  it('how to load an image, per daemon', () => {
    expect(loadHint('podman', 'vllm/vllm-openai:v0.15.1')).toBe(
      'load it on this node with `podman load -i FILE.tar` (made where the registry is reachable with `podman save -o FILE.tar vllm/vllm-openai:v0.15.1`), or point agent.containers.images or agent.containers.registry at a registry this node reaches',
    );
  });
});
