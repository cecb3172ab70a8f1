import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { NodeEngineProxy } from '../src/agent/engine-proxy-node.js';
import type { TlsMaterial } from '../src/agent/engine-proxy.js';
import type { NodeInventory } from '../src/gpu/types.js';
import {
  inventorySchema,
  serverMessageSchema,
  structureOf,
  type ServerMessage,
} from '../src/protocol/agent-protocol.js';
import { replicaEndpoint } from '../src/server/fleets/endpoint.js';

import { startFakeLlama, type RunningFake } from './fakes/engines/fake-engines.js';
import { nodeTlsMaterial } from './support/node-tls.js';

/** The engine proxy as a node's agent runs it: when, with what certificate, and what it changes on the node. */

const silent = pino({ level: 'silent' });
const engineKey = 'engine-key-2';

const inventory: NodeInventory = {
  host: {
    hostname: 'node-1',
    os: 'linux',
    arch: 'x64',
    cpus: { count: 4, model: 'cpu' },
    memory: { total_mib: 1000, free_mib: 500 },
    disk: { path: '/', total_mib: 1000, free_mib: 500 },
  },
  gpu: { method: 'none', reasons: [], cards: [] },
  agent_version: '0.0.0',
  address: '127.0.0.1',
};

function get(port: number, path: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpsRequest(
      { host: '127.0.0.1', port, path, ca, headers: { authorization: `Bearer ${engineKey}` } },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    )
      .on('error', reject)
      .end();
  });
}

describe('the engine proxy on a node', () => {
  let dir: string;
  let tls: TlsMaterial;
  let engine: RunningFake;
  const running: NodeEngineProxy[] = [];
  const options = () => ({
    server: 'https://10.0.0.1:8443',
    address: '127.0.0.1',
    port: 0,
    dataDir: join(dir, 'data'),
    logger: silent,
    assignmentFile: join(dir, 'data', 'agent', 'assignment.json'),
  });
  const start = async (o: Partial<ReturnType<typeof options>> = {}) => {
    const n = await NodeEngineProxy.start({ ...options(), ...o });
    if (n !== undefined) running.push(n);
    return n;
  };
  const assignment = (): Extract<ServerMessage, { type: 'assign' }> => ({
    type: 'assign',
    shards: [
      {
        replica: 'tiny-1',
        model: { name: 'tiny', source: '/m.gguf', replicas: 1, profiles: [] },
        profile: 'cpu',
        rank: 0,
        ranks: 1,
        port: engine.port,
        devices: [],
        api_key: engineKey,
      },
    ],
    engines: {
      llamacpp: { parallel: 1, threads: 1, build: 'b1', release_url: 'https://example.invalid' },
      vllm: { bin: 'vllm' },
      sglang: { bin: 'python3' },
      trtllm: { bin: 'trtllm-serve' },
      stop_grace_s: 1,
    },
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-engine-tls-agent-'));
    tls = nodeTlsMaterial();
    engine = await startFakeLlama({ args: ['--api-key', engineKey] });
  }, 30_000);

  afterEach(async () => {
    for (const n of running.splice(0)) await n.close();
  });

  afterAll(async () => {
    await engine.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is not run when the control plane is on this machine’s loopback', async () => {
    expect(await start({ server: 'http://127.0.0.1:8080' })).toBeUndefined();
    expect(await start({ server: 'https://localhost:8443' })).toBeUndefined();
  });

  it('changes nothing until the control plane gives it a certificate; then engines bind loopback and the inventory names its port', async () => {
    const n = (await start()) as NodeEngineProxy;
    expect(n.bindHost('10.0.0.5')).toBe('10.0.0.5');
    expect(n.inventory(inventory)).toEqual(inventory);
    // A welcome without one (TLS off) changes nothing either.
    n.welcome({ type: 'welcome', node: { id: 'n1', name: 'node-1' }, heartbeat_ms: 1000 });
    expect(n.proxy.serving).toBe(false);

    const welcome = serverMessageSchema.parse({
      type: 'welcome',
      node: { id: 'n1', name: 'node-1' },
      heartbeat_ms: 1000,
      tls,
    });
    expect(welcome.type === 'welcome' && welcome.tls).toEqual(tls);
    n.welcome(welcome as Extract<typeof welcome, { type: 'welcome' }>);
    expect(n.bindHost('10.0.0.5')).toBe('127.0.0.1');
    const reported = n.inventory(inventory);
    expect(reported.engine_proxy).toEqual({ port: n.proxy.port });
    // The agent sends it again when it changed, and the control plane's schema keeps it.
    expect(structureOf(reported)).not.toBe(structureOf(inventory));
    expect(inventorySchema.parse(reported).engine_proxy).toEqual({ port: n.proxy.port });
    // Kept for the next agent, its owner's only.
    expect(statSync(join(dir, 'data', 'agent', 'engine-proxy.json')).mode & 0o777).toBe(0o600);

    n.message(assignment());
    const r = await get(n.proxy.port, '/r/tiny-1/v1/models', tls.ca);
    expect(r.status).toBe(200);
    expect(r.body).toContain('"object":"list"');
  });

  it('serves at once after an agent restart, with the kept certificate and the saved assignment', async () => {
    writeFileSync(join(dir, 'data', 'agent', 'assignment.json'), JSON.stringify(assignment()));
    const n = (await start()) as NodeEngineProxy;
    expect(n.proxy.serving).toBe(true);
    expect(n.bindHost('0.0.0.0')).toBe('127.0.0.1');
    expect((await get(n.proxy.port, '/r/tiny-1/health', tls.ca)).status).toBe(200);
  });

  it('refuses to start on a port another program holds, saying what to set', async () => {
    const holder: Server = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      await expect(start({ port })).rejects.toThrow(
        `the engine proxy could not listen on 127.0.0.1 port ${port}: listen EADDRINUSE: address already in use 127.0.0.1:${port}; set agent.proxy_port to a free port, or 0 for one the OS gives`,
      );
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});

describe('a replica’s endpoint', () => {
  it('goes through the node’s engine proxy when it runs one', () => {
    expect(
      replicaEndpoint({
        replica: 'tiny-1',
        host: '10.0.0.5',
        port: 8001,
        node: { engine_proxy: { port: 7443 } },
      }),
    ).toBe('https://10.0.0.5:7443/r/tiny-1');
    expect(
      replicaEndpoint({
        replica: 'tiny-1',
        host: '[fd00::5]',
        port: 8001,
        node: { engine_proxy: { port: 7443 } },
      }),
    ).toBe('https://[fd00::5]:7443/r/tiny-1');
  });

  it('goes straight to the engine otherwise, and always on the control plane’s loopback', () => {
    expect(replicaEndpoint({ replica: 'tiny-1', host: '10.0.0.5', port: 8001, node: {} })).toBe(
      'http://10.0.0.5:8001',
    );
    expect(
      replicaEndpoint({
        replica: 'tiny-1',
        host: '127.0.0.1',
        port: 8001,
        node: { engine_proxy: { port: 7443 } },
      }),
    ).toBe('http://127.0.0.1:8001');
  });
});
