import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';

import { a100, inventoryWith, migA100 } from '../../test/support/inventory.js';
import { testEngines } from '../../test/support/assignments.js';
import type { ModelSpec, ProfileSpec } from '../catalog/model-spec.js';
import { defaultLlamaBuild, settingsSchema, type ContainersSettings } from '../config/schema.js';
import { migDeviceId } from '../gpu/devices.js';
import type { Card } from '../gpu/types.js';
import type { AssignedShard } from '../protocol/agent-protocol.js';

import { containerSpec } from './shards/container/requests.js';
import type { GpuRequestKind } from './shards/container/types.js';
import type { EngineRunner } from './engine-runners.js';
import { ShardExecutor } from './shard-executor.js';
import type { ShardRun } from './shards/types.js';

// What the agent hands the container supervisor for a profile with runtime: container,
// read off the runs the executor applies (a recording runner stands where the engines run).

const defaults = settingsSchema.parse({}).agent.containers;

function profile(p: Partial<ProfileSpec>): ProfileSpec {
  return {
    name: 'main',
    engine: 'vllm',
    tp: 1,
    pp: 1,
    gpus_per_node: 1,
    nodes: 1,
    args: [],
    env: {},
    adapters: [],
    runtime: 'container',
    ...p,
  };
}

function weightsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-cw-'));
  writeFileSync(join(dir, 'config.json'), '{}');
  return dir;
}

function shard(replica: string, m: ModelSpec, o: Partial<AssignedShard> = {}): AssignedShard {
  return {
    replica,
    model: m,
    profile: 'main',
    rank: 0,
    ranks: 1,
    port: 20001,
    devices: [0],
    api_key: 'llmgw_engine_test',
    ...o,
  };
}

function applied(o: {
  shards: AssignedShard[];
  cards?: Card[];
  settings?: Partial<ContainersSettings>;
  gpuRequest?: GpuRequestKind;
  bindHost?: string;
  dataDir?: string;
  nodeId?: string;
  hubToken?: string;
}): ShardRun[] {
  const dir = o.dataDir ?? mkdtempSync(join(tmpdir(), 'llmgw-cw-data-'));
  const runs: ShardRun[][] = [];
  const runner: EngineRunner = {
    unclaimed: () => [],
    releaseUnclaimed: () => [],
    apply: (d) => runs.push([...d]),
    statuses: () => [],
    logs: () => [],
    follow: () => () => undefined,
    portsTaken: () => [],
    stopped: () => Promise.resolve(),
    stopAll: () => Promise.resolve(),
    detach: () => Promise.resolve(),
  };
  const inventory = inventoryWith(o.cards ?? [a100(0)]);
  const exec = new ShardExecutor({
    dataDir: dir,
    logger: pino({ level: 'silent' }),
    supervisor: runner,
    localBins: {},
    inventory: () => inventory,
    send: () => true,
    bindHost: o.bindHost ?? '127.0.0.1',
    install: () => {
      throw new Error('a container profile installs no llama.cpp');
    },
    containers: {
      settings: { ...defaults, ...o.settings },
      ...(o.gpuRequest === undefined ? {} : { gpuRequest: () => o.gpuRequest as GpuRequestKind }),
      nodeId: () => o.nodeId ?? 'node-1',
    },
  });
  exec.handle({
    type: 'assign',
    shards: o.shards,
    engines: testEngines(),
    ...(o.hubToken === undefined
      ? {}
      : {
          weights: {
            mirror: false,
            hub_endpoint: 'http://127.0.0.1:9',
            hub_token: o.hubToken,
            catalog_blobs: [],
          },
        }),
  });
  void exec.stop();
  const last = runs.at(-1);
  if (last === undefined) throw new Error('nothing applied');
  return last;
}

const model = (source: string, p: Partial<ProfileSpec> = {}): ModelSpec => ({
  name: 'm',
  source,
  replicas: 1,
  profiles: [profile(p)],
});

describe('a container profile, as the agent runs it', () => {
  it('one GPU: bridge networking, the port published on the bind address, the card by UUID', () => {
    const dir = weightsDir();
    const [run] = applied({ shards: [shard('m-1', model(dir, { gpu_class: 'a100-80g' }))] });
    expect(run?.processes[0]?.bin).toBe('vllm');
    const args = run?.processes[0]?.args ?? [];
    expect(args.slice(args.indexOf('--host'), args.indexOf('--host') + 4)).toEqual([
      '--host',
      '0.0.0.0',
      '--port',
      '20001',
    ]);
    expect(run?.health?.url).toBe('http://127.0.0.1:20001/health');
    expect(run?.container).toEqual({
      image: 'vllm/vllm-openai:v0.21.0',
      pull: 'missing',
      gpus: ['GPU-00000000-0000-0000-0000-000000000000'],
      gpuRequest: 'nvidia',
      mounts: [{ source: dir, target: dir, readOnly: true }],
      network: 'bridge',
      publish: { hostIp: '127.0.0.1', port: 20001 },
      ipc: 'host',
      labels: {
        'llmgw.shard': 'm-1/0',
        'llmgw.replica': 'm-1',
        'llmgw.node': 'node-1',
        'llmgw.hash': expect.stringMatching(/^[0-9a-f]{32}$/) as string,
      },
    });
  });

  it('a MIG instance: its MIG- UUID, as CDI names it where the daemon uses CDI', () => {
    const dir = weightsDir();
    const [run] = applied({
      cards: [migA100(0, ['3g.40gb', '3g.40gb'])],
      gpuRequest: 'cdi',
      bindHost: '10.0.0.12',
      shards: [
        shard('m-1', model(dir, { gpu_class: 'a100-80g-mig-3g.40gb' }), { devices: [migDeviceId(0, 1)] }),
      ],
    });
    expect(run?.container).toMatchObject({
      gpus: ['MIG-11111110-2222-3333-4444-555555555551'],
      gpuRequest: 'cdi',
      network: 'bridge',
      publish: { hostIp: '10.0.0.12', port: 20001 },
    });
    expect(run?.health?.url).toBe('http://10.0.0.12:20001/health');
  });

  it("CPU: llama.cpp's CPU image, no GPU, no install, a private /dev/shm of the set size", () => {
    const gguf = join(weightsDir(), 'm.gguf');
    writeFileSync(gguf, 'GGUF');
    const [run] = applied({
      cards: [],
      settings: { ipc: 'private', shm_size_gb: 2 },
      shards: [
        shard('m-1', model(gguf, { engine: 'llamacpp', cpu: true, gpus_per_node: 0 }), { devices: [] }),
      ],
    });
    expect(run?.processes[0]?.bin).toBe('/app/llama-server');
    expect(run?.container).toMatchObject({
      image: `ghcr.io/ggml-org/llama.cpp:server-${defaultLlamaBuild}`,
      gpus: [],
      mounts: [{ source: gguf, target: gguf, readOnly: true }],
      ipc: { shmBytes: 2e9 },
    });
    expect(run?.degradedReason).toBeUndefined();
  });

  it('multi-node ranks: the node network, the engine on the bind address, nothing published', () => {
    const dir = weightsDir();
    const m = model(dir, { engine: 'vllm', gpu_class: 'a100-80g', tp: 2, nodes: 2 });
    const [run] = applied({
      bindHost: '10.0.0.12',
      shards: [shard('m-1', m, { rank: 1, ranks: 2, head: { address: '10.0.0.11', port: 20002 } })],
    });
    expect(run?.container?.network).toBe('host');
    expect(run?.container?.publish).toBeUndefined();
    expect(run?.container?.labels['llmgw.shard']).toBe('m-1/1');
    expect(run?.processes[0]?.args.join(' ')).toContain('--master-addr 10.0.0.11');
  });

  it("chooses the profile's image, then the node's setting, then the default (moved to the mirror)", () => {
    const dir = weightsDir();
    const two = { gpus_per_node: 1, gpu_class: 'a100-80g' };
    const runs = applied({
      cards: [a100(0), a100(1)],
      settings: { images: { sglang: 'registry.local/sglang:mine' }, registry: 'mirror.local:5000' },
      shards: [
        shard('a-1', { ...model(dir, { ...two, image: 'ghcr.io/me/vllm:1' }), name: 'a' }),
        shard(
          'b-1',
          { ...model(dir, { ...two, engine: 'sglang' }), name: 'b' },
          { devices: [1], port: 20003 },
        ),
        shard(
          'c-1',
          { ...model(dir, { ...two, engine: 'trtllm' }), name: 'c' },
          { devices: [1], port: 20005 },
        ),
      ],
    });
    expect(runs.map((r) => [r.key, r.container?.image, r.processes[0]?.bin])).toEqual([
      ['a-1/0', 'ghcr.io/me/vllm:1', 'vllm'],
      ['b-1/0', 'registry.local/sglang:mine', 'python3'],
      ['c-1/0', 'mirror.local:5000/nvidia/tensorrt-llm/release:1.3.0rc5', 'trtllm-serve'],
    ]);
  });

  it('labels each run with a hash of what it runs: the image changes it, the node id does not', () => {
    const dir = weightsDir();
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-cw-data-'));
    const hash = (image: string | undefined, nodeId = 'node-1') =>
      applied({
        dataDir,
        nodeId,
        shards: [
          shard('m-1', model(dir, { gpu_class: 'a100-80g', ...(image === undefined ? {} : { image }) })),
        ],
      })[0]?.container?.labels['llmgw.hash'];
    expect(hash(undefined, 'node-2')).toBe(hash(undefined));
    expect(hash('vllm/vllm-openai:v0.20.0')).not.toBe(hash(undefined));
  });

  it("gives the engine's container no hub token, from the agent's environment or its downloads", () => {
    const token = 'hf_container_token_0123456789';
    vi.stubEnv('HF_TOKEN', token);
    vi.stubEnv('HUGGING_FACE_HUB_TOKEN', token);
    try {
      const [run] = applied({
        hubToken: token,
        shards: [shard('m-1', model(weightsDir(), { gpu_class: 'a100-80g' }))],
      });
      if (run === undefined) throw new Error('no run');
      const env = containerSpec(run, { node: 'node-1', attempt: 'a1' }).env;
      expect(env).toMatchObject({ HF_HUB_OFFLINE: '1' });
      expect(Object.keys(env)).not.toContain('HF_TOKEN');
      expect(Object.values(env).join('\n')).not.toContain(token);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});
