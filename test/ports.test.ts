import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Agent } from '../src/agent/agent.js';
import { isRunning } from '../src/agent/shards/process/process-tree.js';
import type { ServerMessage } from '../src/protocol/agent-protocol.js';

import { freePort } from './fakes/engines/fake-engines.js';
import { llmgw, startDaemon, type Daemon } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { enginePorts, recordingLlamaServer, until, type ReplicaJson } from './support/fleet.js';
import { inventoryWith } from './support/inventory.js';
import { localModel } from './support/local-model.js';

// Engine ports another program holds (issue 10, item 3), and the logs of a shard whose
// engine does not run (item 11). No test here assumes a fixed port is free: each placement
// range starts at a port the test holds itself.

type Assign = Extract<ServerMessage, { type: 'assign' }>;

/** Another program on a port: a plain TCP server answering any request as a healthy engine would. */
function holdPort(port: number, host = '0.0.0.0'): Promise<Server> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.on('data', () =>
      socket.end(
        'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{"status":"ok"}',
      ),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      resolve(server);
    });
  });
}

const portOf = (endpoint: string | undefined) => Number(new URL(endpoint ?? 'http://x:0').port);

describe('the control plane, told that a port is taken', () => {
  let t: TestControlPlane;
  let ports: { first: number; last: number };
  const assigns: Assign[] = [];
  const logRequests: Extract<ServerMessage, { type: 'logs' }>[] = [];
  let agent: Agent;

  beforeAll(async () => {
    ports = await enginePorts(20);
    t = await startControlPlane({
      config: `agent:\n  heartbeat_ms: 150\nplacement:\n  ports: ${ports.first}-${ports.last}\n`,
    });
    const token = (await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string;
    agent = new Agent({
      server: t.url,
      token,
      name: 'port-node',
      dataDir: mkdtempSync(join(tmpdir(), 'llmgw-ports-agent-')),
      logger: pino({ level: 'silent' }),
      inventory: () => Promise.resolve(inventoryWith([], 'port-node')),
      backoff: { initialMs: 20, maxMs: 200 },
      onMessage: (m) => {
        if (m.type === 'assign') assigns.push(m);
        if (m.type === 'logs') logRequests.push(m);
      },
    });
    void agent.run();
    await agent.joined;
  });
  afterAll(async () => {
    await agent.stop();
    await t.stop();
  });

  const lastAssign = () => assigns.at(-1);

  it('places nothing on a node before its agent has said which ports are taken, then none of those', async () => {
    const model = {
      name: 'tiny',
      source: '/models/tiny.gguf',
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', model)).status).toBe(201);
    // The agent is told the placement range at once, so it can report only ports within it.
    await until('the first assignment', () => lastAssign());
    expect(lastAssign()).toMatchObject({ shards: [], ports });
    // Placement runs after the model is stored: its replica waits, once that pass has run.
    const waiting = await until('tiny pending', async () => {
      const items = (await api(t.url, t.adminKey, 'GET', '/replicas?model=tiny')).body.items as unknown[];
      return items.length > 0 ? items : undefined;
    });
    expect(waiting).toMatchObject([{ id: null, state: 'pending' }]);

    agent.send({ type: 'shards', statuses: [], ports_taken: [[ports.first, ports.first]] });
    const first = await until('the assignment', () =>
      lastAssign()?.shards.find((s) => s.model.name === 'tiny'),
    );
    expect(first).toMatchObject({ replica: 'tiny-1', port: ports.first + 1 });
  });

  it('places again, on a free port, a replica whose node says another program holds its port, and hands that port out no more', async () => {
    agent.send({
      type: 'shards',
      statuses: [
        {
          key: 'tiny-1/0',
          replica: 'tiny-1',
          rank: 0,
          state: 'failed',
          reason: 'taken',
          restarts: 0,
          port_taken: { port: ports.first + 1, pid: 4242, name: 'python3' },
        },
      ],
      ports_taken: [[ports.first, ports.first + 1]],
    });
    const moved = await until('the replica placed again', () =>
      lastAssign()?.shards.find((s) => s.model.name === 'tiny' && s.replica !== 'tiny-1'),
    );
    expect(moved).toMatchObject({ replica: 'tiny-2', port: ports.first + 2 });
    expect(lastAssign()?.shards.map((s) => s.replica)).toEqual(['tiny-2']);
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?action=replica.remove&target=replica/tiny-1');
    expect(audit.body.items[0]?.detail.reason).toBe(
      `port ${ports.first + 1} on node port-node is taken by another program (pid 4242, python3): placed again on a free port`,
    );

    // Ports reported taken (no shard of ours on them) are not handed out either.
    agent.send({
      type: 'shards',
      statuses: [{ key: 'tiny-2/0', replica: 'tiny-2', rank: 0, state: 'ready', restarts: 0 }],
      ports_taken: [
        [ports.first, ports.first + 1],
        [ports.first + 3, ports.first + 4],
      ],
    });
    await new Promise((r) => setTimeout(r, 300));
    const other = {
      name: 'other',
      source: '/models/other.gguf',
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', other)).status).toBe(201);
    const placed = await until('the other model placed', () =>
      lastAssign()?.shards.find((s) => s.model.name === 'other'),
    );
    expect(placed.port).toBe(ports.first + 5);
    // A ready replica on a port the report does not name stays where it is.
    expect(lastAssign()?.shards.find((s) => s.model.name === 'tiny')).toMatchObject({
      replica: 'tiny-2',
      port: ports.first + 2,
    });
  });

  it("answers a log request its node refuses with 409 and the node's reason, not 503", async () => {
    const asked = logRequests.length;
    const pending = api(t.url, t.adminKey, 'GET', '/replicas/tiny-2/logs');
    const req = await until('the log request at the agent', () => logRequests[asked]);
    expect(req).toMatchObject({ key: 'tiny-2/0', follow: false });
    agent.send({
      type: 'log_lines',
      request: req.request,
      lines: [],
      done: true,
      error: 'node port-node has no shard tiny-2/0: try again in a few seconds',
    });
    const r = await pending;
    expect(r.status).toBe(409);
    expect(r.body.error).toEqual({
      code: 'conflict',
      message: 'node port-node has no shard tiny-2/0: try again in a few seconds',
    });
  });

  it('answers 409 for the logs of a replica whose node is not connected, saying what to do', async () => {
    await agent.stop();
    await until('the node disconnected', async () =>
      (await api(t.url, t.adminKey, 'GET', '/replicas/tiny-2/logs')).status === 409 ? true : undefined,
    );
    const r = await api(t.url, t.adminKey, 'GET', '/replicas/tiny-2/logs');
    expect(r.body.error).toEqual({
      code: 'conflict',
      message:
        'node port-node is not connected to this control plane, so the logs of replica tiny-2 cannot be read now: start its agent (llmgw ctl nodes says when it was last seen)',
    });
  });
});

describe('llmgw up while another program holds engine ports', () => {
  let dir: string;
  let up: Daemon;
  let env: Record<string, string>;
  let rec: ReturnType<typeof recordingLlamaServer>;
  let ports: { first: number; last: number };
  const held: Server[] = [];
  const adminKey = 'ports-admin-key-0123456789abcdefghij';
  /** Every state of tiny's replicas seen while the tests ran, with the port each was on. */
  const seen: { id: string; state: string; port: number }[] = [];
  let watching = true;
  let watcher: Promise<void>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-ports-up-'));
    mkdirSync(join(dir, 'rec'));
    rec = recordingLlamaServer(join(dir, 'rec'));
    localModel(dir, 'tiny.safetensors');
    ports = await enginePorts(30);
    // Another program holds the first port of the range, on every interface, and answers as an engine would.
    held.push(await holdPort(ports.first));
    const listen = await freePort();
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        `listen: 127.0.0.1:${listen}`,
        'agent:',
        '  heartbeat_ms: 300',
        '  stop_grace_s: 5',
        '  engines:',
        '    llamacpp:',
        `      bin: ${rec.bin}`,
        'placement:',
        `  ports: ${ports.first}-${ports.last}`,
        'models:',
        '  - name: tiny',
        `    source: ${join(dir, 'tiny.safetensors')}`,
        '    profiles:',
        '      - name: cpu',
        '        engine: llamacpp',
        '        cpu: true',
      ].join('\n'),
    );
    env = {
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      LLMGW_SERVER: `http://127.0.0.1:${listen}`,
      LLMGW_KEY: adminKey,
    };
    const noGpu = {
      LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
      LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
    };
    // The admin key and another secret in the environment of `llmgw up`: neither may reach an engine.
    up = startDaemon(
      ['up', '-c', join(dir, 'config.yaml')],
      {
        ...env,
        ...noGpu,
        LLMGW_ADMIN_KEY: adminKey,
        LLMGW_DATA_DIR: join(dir, 'data'),
        SOME_DATABASE_PASSWORD: 'hunter2-not-for-engines',
      },
      dir,
    );
    await up.waitFor(/joined the cluster/);
    watcher = (async () => {
      while (watching) {
        try {
          for (const r of await replicas('tiny'))
            seen.push({ id: r.id, state: r.state, port: portOf(r.endpoint) });
        } catch {
          // Not up yet.
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  });
  afterAll(async () => {
    watching = false;
    await watcher;
    await up.stop('SIGTERM');
    for (const s of held) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Through the API, not `llmgw ctl`: polled often, on a busy machine. */
  const replicas = async (model: string) =>
    (await api(env['LLMGW_SERVER'] ?? '', adminKey, 'GET', `/replicas?model=${model}`)).body
      .items as ReplicaJson[];
  const removals = async (replica: string) =>
    (
      await api(
        env['LLMGW_SERVER'] ?? '',
        adminKey,
        'GET',
        `/audit?action=replica.remove&target=replica/${replica}`,
      )
    ).body.items as { detail: { reason: string } }[];
  const readyTiny = (check: (r: ReplicaJson) => boolean = () => true) =>
    until(
      'a ready replica of tiny',
      async () => (await replicas('tiny')).find((r) => r.state === 'ready' && check(r)),
      40_000,
    );
  const takenReason = (port: number) =>
    new RegExp(
      `^port ${port} on node \\S+ is taken by another program \\(pid ${process.pid}, [^)]+\\): placed again on a free port$`,
    );

  it('gets the replica ready on another port; the other program never makes it ready', async () => {
    const r = await readyTiny();
    expect(portOf(r.endpoint)).not.toBe(ports.first);
    expect(portOf(r.endpoint)).toBeGreaterThan(ports.first);
    expect(portOf(r.endpoint)).toBeLessThanOrEqual(ports.last);
    // It answers itself: the engine's key is its own.
    const launch = rec.launches().find((l) => l.args.includes(String(portOf(r.endpoint))));
    const models = await fetch(`${r.endpoint ?? ''}/v1/models`, {
      headers: { authorization: `Bearer ${launch?.env['LLAMA_API_KEY'] ?? ''}` },
    });
    expect(((await models.json()) as { data: { id: string }[] }).data[0]?.id).toBe('tiny');
    expect(seen.filter((s) => s.state === 'ready' && s.port === ports.first)).toEqual([]);
    // The agent said which ports were taken before anything was placed on its node: the first replica is the one.
    expect(r.id).toBe('tiny-1');
    expect(await removals('tiny-1')).toEqual([]);
  });

  it('gives engines a clean environment: no LLMGW_* (the admin key least of all), nothing else of the agent', async () => {
    const r = await readyTiny();
    const launches = rec.launches();
    expect(launches.length).toBeGreaterThan(0);
    for (const { env: e } of launches) {
      expect(Object.keys(e).filter((k) => k.startsWith('LLMGW_'))).toEqual([]);
      expect(Object.values(e).join('\n')).not.toContain(adminKey);
      expect(e).not.toHaveProperty('SOME_DATABASE_PASSWORD');
      expect(e).not.toHaveProperty('XDG_CONFIG_HOME');
      // What it needs is there: a PATH, its key, its device and cache variables.
      expect(e['PATH']).toBeTruthy();
      expect(e['LLAMA_API_KEY']).toMatch(/^llmgw_engine_/);
      expect(e['CUDA_VISIBLE_DEVICES']).toBe('');
      expect(e['HF_HOME']).toBe(join(dir, 'data', 'models', 'huggingface'));
      expect(e['HF_HUB_CACHE']).toBe(join(dir, 'data', 'models', 'hub'));
      expect(e['HF_HUB_OFFLINE']).toBe('1');
    }
    // As the kernel has it for the engine now running.
    const environ = readFileSync(`/proc/${String(r.shards[0]?.pid)}/environ`, 'utf8');
    expect(environ).not.toContain(adminKey);
    expect(environ).not.toContain('LLMGW_');
  });

  it('moves a replica whose port another program takes while its engine restarts', async () => {
    const before = await readyTiny();
    const port = portOf(before.endpoint);
    const pid = before.shards[0]?.pid ?? 0;
    process.kill(pid, 'SIGKILL');
    // Taken as soon as the dead engine lets go of it, before the agent starts it again.
    held.push(
      await until(
        'the port taken',
        async () => {
          try {
            return await holdPort(port, '127.0.0.1');
          } catch {
            return undefined;
          }
        },
        10_000,
      ),
    );
    const after = await readyTiny((r) => r.id !== before.id);
    expect(portOf(after.endpoint)).not.toBe(port);
    expect(portOf(after.endpoint)).not.toBe(ports.first);
    await until('the old engine gone', () => (isRunning(pid) ? undefined : true));
    expect((await removals(before.id))[0]?.detail.reason).toMatch(takenReason(port));
    expect(seen.filter((s) => s.state === 'ready' && s.port === port && s.id !== before.id)).toEqual([]);
  });

  it('shows why a shard whose engine never started does not run, as its log', async () => {
    const absent = {
      name: 'absent',
      source: join(dir, 'absent.gguf'),
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    };
    expect((await api(env['LLMGW_SERVER'] ?? '', adminKey, 'POST', '/models', absent)).status).toBe(201);
    const r = await until('the absent model failed', async () =>
      (await replicas('absent')).find((x) => x.state === 'failed'),
    );
    const logs = await llmgw(['ctl', 'logs', r.id], env);
    expect(logs.stderr).toBe('');
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(
      new RegExp(
        `^--- llmgw: the engine has not started: the model's weights ${join(dir, 'absent.gguf')} are not on node \\S+: put them there \\(the path must be the same on every node\\), or use a hf:// source\\n$`,
      ),
    );
  });
});
