import { describe, expect, it } from 'vitest';

import type { ShardRun } from '../types.js';
import { containerHash, containerSpec, createRequest, splitImageRef } from './requests.js';
import type { ContainerRun, DaemonKind } from './types.js';

const card = 'GPU-5c1a4a06-1c1e-4bd4-9a3b-1a2b3c4d5e6f';
const card2 = 'GPU-0b2c5d7e-2f3a-4b5c-8d9e-0f1a2b3c4d5e';
const mig = 'MIG-0d1e2f3a-4b5c-5d6e-9f0a-1b2c3d4e5f6a';
const mig2 = 'MIG-7a8b9c0d-1e2f-5a3b-8c4d-5e6f7a8b9c0d';

function run(container: Partial<ContainerRun> = {}): ShardRun {
  return {
    key: 'qwen-1/0',
    replica: 'qwen-1',
    rank: 0,
    processes: [
      {
        name: 'vllm',
        bin: 'vllm',
        args: ['serve', '/models/qwen', '--port', '8000'],
        env: { CUDA_VISIBLE_DEVICES: card, HF_HUB_OFFLINE: '1' },
      },
    ],
    container: {
      image: 'vllm/vllm-openai:v0.15.1',
      pull: 'missing',
      gpus: [card],
      gpuRequest: 'nvidia',
      mounts: [{ source: '/models/qwen', target: '/models/qwen', readOnly: true }],
      network: 'bridge',
      publish: { hostIp: '10.0.0.5', port: 8000 },
      ipc: { shmBytes: 16 * 2 ** 30 },
      labels: {},
      ...container,
    },
    health: { url: 'http://10.0.0.5:8000/health', loading: 'refuses-connections' },
    stopGraceMs: 10_000,
  };
}

function request(kind: DaemonKind, r: ShardRun): ReturnType<typeof createRequest> {
  return createRequest(kind, containerSpec(r, { node: 'node-a', attempt: 'a1b2c3' }));
}

const hashOf = (r: ShardRun): string => containerHash(r);

describe('Docker POST /containers/create', () => {
  it('a whole card by UUID with the nvidia driver, bridge networking with the port published, a private /dev/shm', () => {
    const r = run();
    expect(request('docker', r)).toEqual({
      path: '/containers/create',
      query: { name: 'llmgw-qwen-1-r0-a1b2c3' },
      body: {
        Image: 'vllm/vllm-openai:v0.15.1',
        Entrypoint: ['vllm'],
        Cmd: ['serve', '/models/qwen', '--port', '8000'],
        Env: [`CUDA_VISIBLE_DEVICES=${card}`, 'HF_HUB_OFFLINE=1'],
        Labels: {
          'llmgw.shard': 'qwen-1/0',
          'llmgw.replica': 'qwen-1',
          'llmgw.node': 'node-a',
          'llmgw.hash': hashOf(r),
        },
        ExposedPorts: { '8000/tcp': {} },
        HostConfig: {
          Mounts: [{ Type: 'bind', Source: '/models/qwen', Target: '/models/qwen', ReadOnly: true }],
          NetworkMode: 'bridge',
          RestartPolicy: { Name: 'no' },
          PortBindings: { '8000/tcp': [{ HostIp: '10.0.0.5', HostPort: '8000' }] },
          ShmSize: 17179869184,
          DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: [card], Capabilities: [['gpu']] }],
        },
      },
    });
  });

  it('a MIG instance through CDI, host networking and the host IPC namespace', () => {
    const body = request(
      'docker',
      run({ gpus: [mig], gpuRequest: 'cdi', network: 'host', ipc: 'host' }),
    ).body;
    expect(body['ExposedPorts']).toBeUndefined();
    expect(body['HostConfig']).toEqual({
      Mounts: [{ Type: 'bind', Source: '/models/qwen', Target: '/models/qwen', ReadOnly: true }],
      NetworkMode: 'host',
      RestartPolicy: { Name: 'no' },
      IpcMode: 'host',
      DeviceRequests: [{ Driver: 'cdi', DeviceIDs: [`nvidia.com/gpu=${mig}`] }],
    });
  });

  it('two whole cards go in one request; a CPU placement asks for no device', () => {
    const two = request('docker', run({ gpus: [card, card2] })).body['HostConfig'] as Record<string, unknown>;
    expect(two['DeviceRequests']).toEqual([
      { Driver: 'nvidia', DeviceIDs: [card, card2], Capabilities: [['gpu']] },
    ]);
    const cpu = request('docker', run({ gpus: [] })).body['HostConfig'] as Record<string, unknown>;
    expect(cpu['DeviceRequests']).toBeUndefined();
  });
});

describe('Podman POST /libpod/containers/create', () => {
  it('a SpecGenerator: CDI devices by UUID, read-only bind mounts, port mappings, shm_size, no restart policy', () => {
    const r = run({ gpus: [card, card2], gpuRequest: 'cdi' });
    expect(request('podman', r)).toEqual({
      path: '/containers/create',
      query: {},
      body: {
        name: 'llmgw-qwen-1-r0-a1b2c3',
        image: 'vllm/vllm-openai:v0.15.1',
        entrypoint: ['vllm'],
        command: ['serve', '/models/qwen', '--port', '8000'],
        env: { CUDA_VISIBLE_DEVICES: card, HF_HUB_OFFLINE: '1' },
        labels: {
          'llmgw.shard': 'qwen-1/0',
          'llmgw.replica': 'qwen-1',
          'llmgw.node': 'node-a',
          'llmgw.hash': hashOf(r),
        },
        mounts: [{ destination: '/models/qwen', source: '/models/qwen', type: 'bind', options: ['ro'] }],
        netns: { nsmode: 'bridge' },
        restart_policy: 'no',
        portmappings: [{ host_ip: '10.0.0.5', host_port: 8000, container_port: 8000, protocol: 'tcp' }],
        shm_size: 17179869184,
        devices: [{ path: `nvidia.com/gpu=${card}` }, { path: `nvidia.com/gpu=${card2}` }],
      },
    });
  });

  it('a MIG instance, host networking and IPC', () => {
    const body = request(
      'podman',
      run({ gpus: [mig], gpuRequest: 'cdi', network: 'host', ipc: 'host' }),
    ).body;
    expect(body['netns']).toEqual({ nsmode: 'host' });
    expect(body['ipcns']).toEqual({ nsmode: 'host' });
    expect(body['portmappings']).toBeUndefined();
    expect(body['shm_size']).toBeUndefined();
    expect(body['devices']).toEqual([{ path: `nvidia.com/gpu=${mig}` }]);
  });

  it('refuses GPUs by the nvidia driver: libpod takes CDI devices only', () => {
    expect(() => request('podman', run({ gpus: [card], gpuRequest: 'nvidia' }))).toThrow(
      'Podman passes GPUs as CDI devices only; set agent.containers.gpus to cdi (or auto) and generate the spec with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`',
    );
  });
});

describe('containerSpec refusals', () => {
  it('refuses more than one MIG instance per engine (seed 000)', () => {
    expect(() => request('docker', run({ gpus: [mig, mig2], gpuRequest: 'cdi' }))).toThrow(
      `shard qwen-1/0 asks for 2 MIG instances (${mig}, ${mig2}); an engine uses one MIG instance (CUDA sees only the first), so place it on one instance or on whole cards`,
    );
  });

  it('refuses bridge networking without a port to publish, and a run of several processes', () => {
    const r = run();
    delete r.container?.publish;
    expect(() => request('docker', r)).toThrow(
      'shard qwen-1/0 runs with bridge networking but publishes no port; give it the engine',
    );
    const two = run();
    two.processes = [...two.processes, ...two.processes];
    expect(() => request('docker', two)).toThrow(
      'the engine gave 2 processes for shard qwen-1/0; a container runs one (run this profile as processes)',
    );
  });
});

describe('containerHash', () => {
  it('changes with the image, not with the labels cwire passes', () => {
    const base = containerHash(run());
    expect(containerHash(run({ image: 'vllm/vllm-openai:v0.16.0' }))).not.toBe(base);
    expect(containerHash(run({ labels: { 'llmgw.hash': 'other' } }))).toBe(base);
  });
});

describe('splitImageRef', () => {
  it.each([
    ['vllm/vllm-openai:v0.15.1', 'vllm/vllm-openai', 'v0.15.1'],
    ['ghcr.io/ggml-org/llama.cpp:server-cuda', 'ghcr.io/ggml-org/llama.cpp', 'server-cuda'],
    ['registry.local:5000/lmsysorg/sglang', 'registry.local:5000/lmsysorg/sglang', 'latest'],
    ['nvcr.io/nvidia/tritonserver@sha256:abc', 'nvcr.io/nvidia/tritonserver', 'sha256:abc'],
  ])('%s', (ref, fromImage, tag) => {
    expect(splitImageRef(ref)).toEqual({ fromImage, tag });
  });
});
