import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { isRunning } from '../src/agent/shards/process/process-tree.js';

import { freePort } from './fakes/engines/fake-engines.js';
import type { FakeHub } from './fakes/hub/hub.js';
import { llmgw, startDaemon, type Daemon } from './support/cli.js';
import { fakeNvidiaSmi } from './support/fake-gpu.js';
import {
  enginePorts,
  recordingLlamaServer,
  replicas,
  serveLlamaRelease,
  until,
  type ReplicaJson,
} from './support/fleet.js';
import { startTestHub } from './support/hub.js';
import { localModel } from './support/local-model.js';

const noGpu = {
  LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
  LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
};
const ready = (
  model: string,
  env: Record<string, string>,
  check: (r: Awaited<ReturnType<typeof replicas>>[number]) => boolean = () => true,
) =>
  until(`a ready replica of ${model}`, async () =>
    (await replicas(env, model)).find((r) => r.state === 'ready' && check(r)),
  );

describe('llmgw up with a declared llama.cpp model', () => {
  let dir: string;
  let up: Daemon;
  let env: Record<string, string>;
  let rec: ReturnType<typeof recordingLlamaServer>;
  let ports: { first: number; last: number };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-fleet-up-'));
    mkdirSync(join(dir, 'rec'));
    rec = recordingLlamaServer(join(dir, 'rec'));
    localModel(dir, 'tiny.safetensors');
    ports = await enginePorts();
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        'listen: 127.0.0.1:0',
        `placement: {ports: ${ports.first}-${ports.last}}`,
        'agent:',
        '  heartbeat_ms: 300',
        '  stop_grace_s: 5',
        '  engines:',
        '    llamacpp:',
        `      bin: ${rec.bin}`,
        'models:',
        '  - name: tiny',
        `    source: ${join(dir, 'tiny.safetensors')}`,
        '    context_length: 2048',
        '    profiles:',
        '      - name: cpu',
        '        engine: llamacpp',
        '        cpu: true',
      ].join('\n'),
    );
    env = { XDG_CONFIG_HOME: join(dir, 'xdg') };
    up = startDaemon(
      ['up', '-c', join(dir, 'config.yaml')],
      { ...env, ...noGpu, LLMGW_DATA_DIR: join(dir, 'data') },
      dir,
    );
    await up.waitFor(/logged in with it/);
  });
  afterAll(async () => {
    await up.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  it('ends with a ready replica answering on its own port, behind a key only the gateway knows', async () => {
    const r = await ready('tiny', env);
    expect(r).toMatchObject({ id: 'tiny-1', node: expect.any(String), restarts: 0 });
    expect(r.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(Number(new URL(r.endpoint ?? '').port)).toBeGreaterThanOrEqual(ports.first);
    expect((await fetch(`${r.endpoint}/health`)).status).toBe(200);
    expect((await fetch(`${r.endpoint}/v1/models`)).status).toBe(401);
    const [launch] = rec.launches();
    expect(launch?.args).toEqual(
      expect.arrayContaining([
        '--metrics',
        '--jinja',
        '--alias',
        'tiny',
        '--parallel',
        '4',
        '--ctx-size',
        '8192',
        '--threads',
        '1',
      ]),
    );
    expect(launch?.args).not.toContain('--n-gpu-layers');
    expect(launch?.env['LLAMA_API_KEY']).toMatch(/^llmgw_engine_/);
    expect(launch?.args.join(' ')).not.toContain('llmgw_engine_');
    const models = await fetch(`${r.endpoint}/v1/models`, {
      headers: { authorization: `Bearer ${launch?.env['LLAMA_API_KEY'] ?? ''}` },
    });
    expect(((await models.json()) as { data: { id: string }[] }).data[0]?.id).toBe('tiny');
  });

  it('restarts an engine that was killed, and reports the exit with its last log lines', async () => {
    const before = await ready('tiny', env);
    const pid = before.shards[0]?.pid;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid!, 'SIGKILL');
    const after = await ready('tiny', env, (r) => r.restarts >= 1);
    expect(after.shards[0]?.pid).not.toBe(pid);
    expect(after.shards[0]?.last_exit).toMatchObject({ signal: 'SIGKILL' });
    expect(after.shards[0]?.last_exit?.log_tail.join('\n')).toContain('listening on');
    const logs = await llmgw(['ctl', 'logs', 'tiny-1', '--tail', '50'], env);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain('llama_server: model loaded');
    const table = await llmgw(['ctl', 'replicas'], env);
    expect(table.stdout).toMatch(
      /^REPLICA\s+MODEL\s+PROFILE\s+NODE\s+DEVICES\s+STATE\s+READY\s+RESTARTS\s+ENDPOINT/,
    );
    expect(table.stdout).toMatch(
      /tiny-1\s+tiny\s+cpu\s+\S+\s+cpu \(1 thread\)\s+ready\s+\d+s\s+1\s+http:\/\/127\.0\.0\.1:\d+/,
    );
  });

  it('follows a log as it is written', async () => {
    const follower = startDaemon(['ctl', 'logs', 'tiny-1', '-f', '--tail', '0'], env);
    try {
      await new Promise((r) => setTimeout(r, 500));
      const pid = (await ready('tiny', env)).shards[0]?.pid;
      process.kill(pid!, 'SIGKILL');
      await follower.waitFor(/loading model/, 20_000);
    } finally {
      await follower.stop('SIGINT');
    }
  });

  it('restarts a replica beside the old one, which stops once the new one is ready', async () => {
    const old = await ready('tiny', env);
    const r = await llmgw(['ctl', 'replica', 'restart', old.id], env);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(
      `a new replica of tiny is starting beside ${old.id}, which stops once the new one is ready`,
    );
    const fresh = await until('the old replica gone and the new one ready', async () => {
      const list = await replicas(env, 'tiny');
      return list.length === 1 && list[0]?.id !== old.id && list[0]?.state === 'ready' ? list[0] : undefined;
    });
    expect(fresh.id).toBe('tiny-2');
    await until('the old engine stopped', () => (isRunning(old.shards[0]!.pid!) ? undefined : true));
  });

  it('restarts one in place when asked: stopped first', async () => {
    const old = await ready('tiny', env);
    const r = await llmgw(['ctl', 'replica', 'restart', old.id, '--in-place'], env);
    expect(r.stdout.trim()).toBe(`replica ${old.id} stopped; a new replica of tiny takes its place`);
    const fresh = await ready('tiny', env, (x) => x.id !== old.id);
    expect(fresh.id).toBe('tiny-3');
    expect(isRunning(old.shards[0]!.pid!)).toBe(false);
  });

  it('scales a model, says why replicas wait, and scaling to 0 leaves no process behind', async () => {
    const model = {
      name: 'small',
      source: join(dir, 'tiny.safetensors'),
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    };
    expect((await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(model))).code).toBe(0);
    const small = await ready('small', env);
    const pid = small.shards[0]!.pid!;
    // A CPU replica takes half the CPUs: with tiny and one of small, none are left.
    expect((await llmgw(['ctl', 'model', 'scale', 'small', '3'], env)).stdout.trim()).toBe(
      'model "small" scaled to 3 replicas',
    );
    const pending = await until('a pending replica', async () =>
      (await replicas(env, 'small')).find((r) => r.state === 'pending'),
    );
    expect(pending.reason).toBe(
      'no ready node has half its CPU threads free and 1024 MiB of RAM (vm: 0 threads free, needs 1)'.replace(
        'vm',
        small.node ?? '',
      ),
    );
    const table = await llmgw(['ctl', 'replicas', 'small'], env);
    expect(table.stdout).toMatch(
      /-\s+small\s+-\s+-\s+-\s+pending\s+-\s+0\s+-\s+no ready node has half its CPU threads free/,
    );

    expect((await llmgw(['ctl', 'model', 'scale', 'small', '0'], env)).code).toBe(0);
    await until('no replica of small', async () =>
      (await replicas(env, 'small')).length === 0 ? true : undefined,
    );
    await until('its engine gone', () => (isRunning(pid) ? undefined : true));
    const tiny = await ready('tiny', env);
    expect(isRunning(tiny.shards[0]!.pid!)).toBe(true);
    const declared = await llmgw(['ctl', 'model', 'scale', 'tiny', '2'], env);
    expect(declared.code).toBe(1);
    expect(declared.stderr).toContain('is declared in the settings file');
  });

  it('refuses to restart a replica that does not exist', async () => {
    const r = await llmgw(['ctl', 'replica', 'restart', 'tiny-99'], env);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('error: no replica is named "tiny-99" (llmgw ctl replicas lists them)');
  });
});

describe('llmgw server with agents on other machines', () => {
  let dir: string;
  let port: number;
  let server: Daemon;
  const agents = new Map<string, Daemon>();
  let env: Record<string, string>;
  let cpuRec: ReturnType<typeof recordingLlamaServer>;
  let migRec: ReturnType<typeof recordingLlamaServer>;
  const adminKey = 'fleet-admin-key-0123456789abcdefgh';
  // hf://Qwen/Qwen2.5-72B-Instruct resolves against it.
  let hub: FakeHub;

  const startServer = async () => {
    server = startDaemon(['server', '--config', join(dir, 'config.yaml')], {
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_DATA_DIR: join(dir, 'cp'),
      HF_ENDPOINT: hub.url,
    });
    await server.waitFor(/control plane listening/);
  };
  const token = async () =>
    JSON.parse((await llmgw(['ctl', 'node', 'token', '--json'], env)).stdout).secret as string;
  const startAgent = async (name: string, extra: Record<string, string>) => {
    const a = startDaemon(
      ['agent', '--server', `http://127.0.0.1:${port}`, '--token', await token(), '--name', name],
      { LLMGW_DATA_DIR: join(dir, name), ...extra },
    );
    agents.set(name, a);
    await a.waitFor(/joined the cluster/);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-fleet-'));
    port = await freePort();
    for (const d of ['cpu-rec', 'mig-rec']) mkdirSync(join(dir, d));
    cpuRec = recordingLlamaServer(join(dir, 'cpu-rec'));
    migRec = recordingLlamaServer(join(dir, 'mig-rec'));
    localModel(dir);
    const p = await enginePorts();
    writeFileSync(
      join(dir, 'config.yaml'),
      `listen: 127.0.0.1:${port}\nagent:\n  heartbeat_ms: 300\n  stop_grace_s: 5\nplacement:\n  node_lost_after_s: 5\n  ports: ${p.first}-${p.last}\n`,
    );
    env = {
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      LLMGW_SERVER: `http://127.0.0.1:${port}`,
      LLMGW_KEY: adminKey,
    };
    hub = await startTestHub();
    await startServer();
    await startAgent('cpu-node', { ...noGpu, LLMGW_AGENT_ENGINES_LLAMACPP_BIN: cpuRec.bin });
    // Both nodes are this machine: the second listens on another loopback address, as a second host would.
    await startAgent('mig-node', {
      LLMGW_AGENT_ADDRESS: '127.0.0.2',
      LLMGW_NVML_LIBRARY: '/nonexistent',
      LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
      FAKE_NVIDIA_SMI_FIXTURE: 'h100-mig-590',
      LLMGW_AGENT_ENGINES_LLAMACPP_BIN: migRec.bin,
    });
  });
  afterAll(async () => {
    for (const a of agents.values()) await a.stop('SIGTERM');
    await server.stop('SIGTERM');
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('places a MIG profile on exactly one instance: CUDA_VISIBLE_DEVICES=MIG-<uuid>, no Vulkan variable', async () => {
    const model = {
      name: 'on-mig',
      source: join(dir, 'm.safetensors'),
      profiles: [{ name: 'mig', engine: 'llamacpp', gpu_class: 'h100-80g-mig-3g.40gb' }],
    };
    expect((await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(model))).code).toBe(0);
    const r = await until('the MIG replica up', async () =>
      (await replicas(env, 'on-mig')).find((x) => x.state === 'ready' || x.state === 'degraded'),
    );
    expect(r.node).toBe('mig-node');
    expect(r.shards[0]?.devices).toEqual(['0/mig0']);
    const [launch] = migRec.launches();
    expect(launch?.env['CUDA_VISIBLE_DEVICES']).toBe('MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c');
    expect(launch?.env).not.toHaveProperty('GGML_VK_VISIBLE_DEVICES');
    expect(launch?.args).toEqual(expect.arrayContaining(['--n-gpu-layers', '999']));
    const status = JSON.parse((await llmgw(['ctl', 'status', '--json'], env)).stdout);
    expect(status.devices.find((d: { class: string }) => d.class === 'h100-80g-mig-3g.40gb')).toMatchObject({
      total: 1,
      used: 1,
      free: 0,
    });
    const nodes = await llmgw(['ctl', 'nodes'], env);
    expect(nodes.stdout).toMatch(/mig-node\s+Ready\s+\S+\s+1×h100-80g-mig-3g\.40gb \(1 in use\)/);
  });

  it('says why a replica waits when no node has its class', async () => {
    const model = {
      name: 'big',
      source: 'hf://Qwen/Qwen2.5-72B-Instruct',
      profiles: [{ name: 'a100', engine: 'vllm', gpu_class: 'a100-80g', tp: 4 }],
    };
    expect((await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(model))).code).toBe(0);
    const r = await until('a pending replica', async () =>
      (await replicas(env, 'big')).find((x) => x.state === 'pending'),
    );
    expect(r.reason).toMatch(/^no node has a100-80g cards \(classes here: .*h100-80g-mig-3g\.40gb/);
  });

  it('restarts no engine when the control plane restarts, and keeps them running while it is away', async () => {
    const model = {
      name: 'steady',
      source: join(dir, 'm.safetensors'),
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    };
    expect((await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(model))).code).toBe(0);
    const before = await ready('steady', env);
    const pid = before.shards[0]!.pid!;
    expect(await server.stop('SIGTERM')).toBe(0);
    await new Promise((r) => setTimeout(r, 1500));
    expect(isRunning(pid)).toBe(true);
    expect((await fetch(`${before.endpoint ?? ''}/health`)).status).toBe(200);
    await startServer();
    const after = await ready('steady', env);
    expect(after.id).toBe(before.id);
    expect(after.shards[0]?.pid).toBe(pid);
    expect(after.restarts).toBe(0);
  });

  it('places the replicas of a node lost past the grace period elsewhere', async () => {
    const before = await ready('steady', env);
    const lostNode = before.node!;
    const other = lostNode === 'cpu-node' ? 'mig-node' : 'cpu-node';
    await agents.get(lostNode)?.stop('SIGTERM');
    agents.delete(lostNode);
    const moved = await until(
      'the replica placed on the other node',
      async () =>
        (await replicas(env, 'steady')).find(
          (r) => r.node === other && r.state === 'ready' && r.id !== before.id,
        ),
      40_000,
    );
    expect(moved.id).not.toBe(before.id);
    const audit = JSON.parse(
      (await llmgw(['ctl', 'audit', '--action', 'replica.remove', '--json'], env)).stdout,
    );
    expect(
      audit.items.find((e: { target: string }) => e.target === `replica/${before.id}`).detail.reason,
    ).toBe(`node ${lostNode} was not ready for 5 s`);
  });
});

describe('replicas that keep running while their model scales and the control plane restarts', () => {
  let dir: string;
  let port: number;
  let server: Daemon;
  let agent: Daemon;
  let env: Record<string, string>;
  let rec: ReturnType<typeof recordingLlamaServer>;
  const adminKey = 'steady-admin-key-0123456789abcdefgh';
  // Up: ready, or degraded where the fake llama-server lists none of the fake GPUs.
  const up = (r: ReplicaJson) =>
    (r.state === 'ready' || r.state === 'degraded') && r.shards[0]?.pid !== undefined;
  const upReplicas = (model: string, n: number) =>
    until(`${n} replicas of ${model} up`, async () => {
      const list = await replicas(env, model);
      if (list.length === n && list.every(up)) return list;
      // Thrown, so that a timeout says what was seen last.
      throw new Error(
        JSON.stringify(
          list.map((r) => ({ id: r.id, state: r.state, reason: r.reason, pid: r.shards[0]?.pid })),
        ),
      );
    });
  const startServer = async () => {
    server = startDaemon(['server', '--config', join(dir, 'config.yaml')], {
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_DATA_DIR: join(dir, 'cp'),
    });
    await server.waitFor(/control plane listening/);
  };
  const addModel = async (name: string, replicaCount: number, gpus = 1) => {
    const model = {
      name,
      source: join(dir, 'm.safetensors'),
      replicas: replicaCount,
      profiles: [{ name: 'a100', engine: 'llamacpp', gpu_class: 'a100-80g', gpus_per_node: gpus }],
    };
    const r = await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(model));
    expect(r.code, r.stderr).toBe(0);
  };
  const scale = async (name: string, n: number) => {
    expect((await llmgw(['ctl', 'model', 'scale', name, String(n)], env)).stdout.trim()).toBe(
      `model "${name}" scaled to ${n} replica${n === 1 ? '' : 's'}`,
    );
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-steady-'));
    port = await freePort();
    mkdirSync(join(dir, 'rec'));
    rec = recordingLlamaServer(join(dir, 'rec'));
    localModel(dir);
    // Engine ports from a free one up, away from the default range other tests on this machine use.
    const engines = await freePort();
    writeFileSync(
      join(dir, 'config.yaml'),
      `listen: 127.0.0.1:${port}\nagent:\n  heartbeat_ms: 300\n  stop_grace_s: 5\nplacement:\n  node_lost_after_s: 5\n  ports: ${engines}-${engines + 40}\n`,
    );
    env = {
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      LLMGW_SERVER: `http://127.0.0.1:${port}`,
      LLMGW_KEY: adminKey,
    };
    await startServer();
    const token = JSON.parse((await llmgw(['ctl', 'node', 'token', '--json'], env)).stdout).secret as string;
    // Eight fake A100s: room for every replica here, whatever the CPUs of the machine.
    agent = startDaemon(
      ['agent', '--server', `http://127.0.0.1:${port}`, '--token', token, '--name', 'gpu-node'],
      {
        LLMGW_DATA_DIR: join(dir, 'node'),
        LLMGW_NVML_LIBRARY: '/nonexistent',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
        FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550',
        LLMGW_AGENT_ENGINES_LLAMACPP_BIN: rec.bin,
      },
    );
    await agent.waitFor(/joined the cluster/);
  });
  afterAll(async () => {
    await agent.stop('SIGTERM');
    await server.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  it('scales 1 → 2 beside the running replica, and 2 → 1 stopping one while the other runs on', async () => {
    await addModel('scaled', 1);
    const [first] = await upReplicas('scaled', 1);
    const pid = first!.shards[0]!.pid!;
    await scale('scaled', 2);
    const two = await upReplicas('scaled', 2);
    const kept = two.find((r) => r.id === first!.id);
    expect(kept?.shards[0]?.pid).toBe(pid);
    expect(kept?.restarts).toBe(0);
    expect(two.some((r) => r.retiring === true)).toBe(false);
    const added = two.find((r) => r.id !== first!.id)!;

    await scale('scaled', 1);
    const [left] = await upReplicas('scaled', 1);
    expect(left?.id).toBe(first!.id);
    expect(left?.shards[0]?.pid).toBe(pid);
    expect(isRunning(pid)).toBe(true);
    await until('the engine of the replica scaled away stopped', () =>
      isRunning(added.shards[0]!.pid!) ? undefined : true,
    );
    const audit = JSON.parse(
      (await llmgw(['ctl', 'audit', '--action', 'replica.remove', '--json'], env)).stdout,
    );
    expect(
      audit.items
        .filter((e: { detail: { model: string } }) => e.detail.model === 'scaled')
        .map((e: { target: string; detail: { reason: string } }) => `${e.target}: ${e.detail.reason}`),
    ).toEqual([`replica/${added.id}: scaled down`]);
  });

  it('scales up with no room by leaving the running replica alone and one pending, saying why', async () => {
    await addModel('wide', 1, 4);
    const [first] = await upReplicas('wide', 1);
    await scale('wide', 3);
    // Eight cards: one for scaled, four for wide; no four left for another.
    const list = await until('two pending replicas of wide', async () => {
      const l = await replicas(env, 'wide');
      return l.filter((r) => r.state === 'pending').length === 2 ? l : undefined;
    });
    expect(list).toHaveLength(3);
    const running = list.find((r) => r.id === first!.id);
    expect(running?.retiring).toBeUndefined();
    expect(running?.shards[0]?.pid).toBe(first!.shards[0]!.pid);
    expect(list.find((r) => r.state === 'pending')?.reason).toMatch(
      /^no ready node has 4 free a100-80g cards \(gpu-node: \d free\)$/,
    );
    await scale('wide', 0);
    await until('no replica of wide', async () =>
      (await replicas(env, 'wide')).length === 0 ? true : undefined,
    );
  });

  it('gives each replica of a model named with -new- a port of its own, and adds no more than asked', async () => {
    await addModel('my-new-model', 2);
    const two = await upReplicas('my-new-model', 2);
    // Placement passes run on every change and every few seconds: let one more run.
    await new Promise((r) => setTimeout(r, 6000));
    const after = await replicas(env, 'my-new-model');
    expect(after.map((r) => r.id).sort()).toEqual(two.map((r) => r.id).sort());
    const endpoints = after.map((r) => r.endpoint);
    expect(new Set(endpoints).size).toBe(2);
    for (const e of endpoints) expect((await fetch(`${e ?? ''}/health`)).status).toBe(200);
  });

  it('keeps no engine key in its database, and its secret in a file only its owner reads', () => {
    const keys = rec
      .launches()
      .map((l) => l.env['LLAMA_API_KEY'])
      .filter((k): k is string => k !== undefined);
    expect(keys.length).toBeGreaterThan(0);
    const files = ['llmgw.db', 'llmgw.db-wal'].map((f) => join(dir, 'cp', f)).filter((f) => existsSync(f));
    const bytes = Buffer.concat(files.map((f) => readFileSync(f)));
    expect(bytes.length).toBeGreaterThan(0);
    for (const k of keys) expect(bytes.includes(Buffer.from(k))).toBe(false);
    expect(statSync(join(dir, 'cp', 'engine-key.secret')).mode & 0o777).toBe(0o600);
  });

  it('restarts nothing when the control plane comes back after more than node_lost_after_s away', async () => {
    const before = (await replicas(env)).filter((r) => r.state !== 'pending');
    expect(before.length).toBeGreaterThan(0);
    expect(await server.stop('SIGTERM')).toBe(0);
    // node_lost_after_s is 5: away for longer than that.
    await new Promise((r) => setTimeout(r, 6500));
    await startServer();
    const after = await until('every replica up again', async () => {
      const list = (await replicas(env)).filter((r) => r.state !== 'pending');
      return list.length === before.length && list.every(up) ? list : undefined;
    });
    for (const b of before) {
      const a = after.find((r) => r.id === b.id);
      expect(
        a,
        `replica ${b.id}: ${server
          .output()
          .split('\n')
          .filter((l) => l.includes('replica'))
          .join('\n')}`,
      ).toBeDefined();
      expect(a?.shards[0]?.pid).toBe(b.shards[0]?.pid);
      expect(a?.restarts).toBe(0);
    }
    // Still so a grace period later, now that the agent is heard again.
    await new Promise((r) => setTimeout(r, 5500));
    expect(
      (await replicas(env))
        .filter((r) => r.state !== 'pending')
        .map((r) => r.id)
        .sort(),
    ).toEqual(before.map((r) => r.id).sort());
    const audit = JSON.parse(
      (await llmgw(['ctl', 'audit', '--action', 'replica.remove', '--json'], env)).stdout,
    );
    expect(
      audit.items.filter((e: { detail: { reason: string } }) => e.detail.reason.includes('was not ready')),
    ).toEqual([]);
  });
});

describe('llama.cpp installed by the agent', () => {
  let dir: string;
  let server: Daemon;
  let agent: Daemon;
  let release: Awaited<ReturnType<typeof serveLlamaRelease>>;
  let env: Record<string, string>;
  const adminKey = 'install-admin-key-0123456789abcdefgh';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-install-'));
    release = await serveLlamaRelease();
    const port = await freePort();
    localModel(dir);
    const p = await enginePorts();
    writeFileSync(
      join(dir, 'config.yaml'),
      `listen: 127.0.0.1:${port}\nagent:\n  heartbeat_ms: 300\n  engines:\n    llamacpp:\n      release_url: ${release.url}\nplacement:\n  ports: ${p.first}-${p.last}\n`,
    );
    server = startDaemon(['server', '--config', join(dir, 'config.yaml')], {
      LLMGW_ADMIN_KEY: adminKey,
      LLMGW_DATA_DIR: join(dir, 'cp'),
    });
    await server.waitFor(/control plane listening/);
    env = {
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      LLMGW_SERVER: `http://127.0.0.1:${port}`,
      LLMGW_KEY: adminKey,
    };
    const tok = JSON.parse((await llmgw(['ctl', 'node', 'token', '--json'], env)).stdout).secret as string;
    agent = startDaemon(
      ['agent', '--server', `http://127.0.0.1:${port}`, '--token', tok, '--name', 'gpu-node'],
      {
        LLMGW_DATA_DIR: join(dir, 'node'),
        LLMGW_NVML_LIBRARY: '/nonexistent',
        LLMGW_NVIDIA_SMI: fakeNvidiaSmi,
        FAKE_NVIDIA_SMI_FIXTURE: 'a100x8-550',
      },
    );
    await agent.waitFor(/joined the cluster/);
  });
  afterAll(async () => {
    await agent.stop('SIGTERM');
    await server.stop('SIGTERM');
    await release.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('installs the build the control plane asks for, with progress, and says loudly when it sees no GPU', async () => {
    const model = {
      name: 'gpu-llama',
      source: join(dir, 'm.safetensors'),
      profiles: [{ name: 'a100', engine: 'llamacpp', gpu_class: 'a100-80g' }],
    };
    expect((await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(model))).code).toBe(0);
    const r = await until('the replica running', async () =>
      (await replicas(env, 'gpu-llama')).find((x) => x.state === 'degraded'),
    );
    expect(r.reason).toMatch(
      /this node has GPUs but its llama\.cpp build \(b10587, vulkan\) lists none, so llama\.cpp runs on the CPU at about a tenth of the speed/,
    );
    // A node with NVIDIA cards and no CUDA archive configured gets the Vulkan build.
    expect(release.downloads()).toEqual(['llama-b10587-bin-ubuntu-vulkan-x64.tar.gz']);
    expect(agent.output()).toMatch(/installing llama\.cpp/);
    expect(agent.output()).toMatch(/llama\.cpp b10587-vulkan: downloading/);
    expect(agent.output()).toMatch(/"level":"error".*this node has GPUs but the llama\.cpp build lists none/);
  });
});
