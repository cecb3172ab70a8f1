import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { EngineProxy, engineRoutesOf, type TlsMaterial } from '../src/agent/engine-proxy.js';
import { Gateway } from '../src/gateway/gateway.js';
import type { GatewayKeys } from '../src/gateway/keys.js';
import { nodeRequest } from '../src/http1/client-io.js';
import { UpstreamPool } from '../src/http1/upstream-pool.js';
import type { AssignedShard } from '../src/protocol/agent-protocol.js';
import type { RouteReplica, RouteTable } from '../src/protocol/routes.js';

import { startFakeLlama, type RunningFake } from './fakes/engines/fake-engines.js';
import { nodeTlsMaterial } from './support/node-tls.js';

/**
 * Gateway → a node's engine proxy (TLS, the cluster CA) → the engine on the node's
 * loopback: what a gateway on another machine does. Certificates are made with the
 * openssl CLI, as the control plane's CA would issue them.
 */

const silent = pino({ level: 'silent' });
const engineKey = 'engine-key-1';

const replica = (id: string, endpoint: string): RouteReplica => ({
  id,
  model: 'tiny',
  engine: 'llamacpp',
  endpoint,
  apiKey: engineKey,
  servedName: 'tiny',
  adapters: [],
  capacity: 4,
  loadMetrics: { running: 'llamacpp:requests_processing', waiting: 'llamacpp:requests_deferred' },
  metricsUrl: `${endpoint}/metrics`,
  healthPath: '/health',
});

const keys: GatewayKeys = {
  check: () => Promise.resolve({ name: 'team', role: 'user', allowedModels: null, rpm: null, tpm: null }),
};

const shard = (replicaId: string, port: number, apiKey = engineKey): AssignedShard =>
  ({ replica: replicaId, rank: 0, ranks: 1, port, api_key: apiKey }) as AssignedShard;

/** A gateway in this process over a fixed route table, behind node:http on 127.0.0.1:0. */
async function gatewayOver(table: RouteTable): Promise<{ gateway: Gateway; front: Server; url: string }> {
  const gateway = new Gateway({
    keys,
    routes: { routeTable: () => Promise.resolve(table) },
    usage: { write: () => Promise.resolve() },
    logger: silent,
    retries: 0,
  });
  await gateway.start();
  const front = createServer((req, res) => gateway.handle(nodeRequest(req), res));
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  return { gateway, front, url: `http://127.0.0.1:${(front.address() as AddressInfo).port}` };
}

const chat = (url: string, extra: Record<string, unknown> = {}) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer client-key', 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'tiny',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
      ...extra,
    }),
  });

/** One request straight to the proxy over TLS, verified against `ca`. */
function viaProxy(
  port: number,
  o: { path: string; ca: string; key?: string; method?: string; body?: string },
): Promise<{ status: number; body: string; pieces: { at: number; text: string }[] }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path: o.path,
        method: o.method ?? 'GET',
        ca: o.ca,
        headers: {
          ...(o.key === undefined ? {} : { authorization: `Bearer ${o.key}` }),
          ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        const pieces: { at: number; text: string }[] = [];
        res.setEncoding('utf8');
        res.on('data', (text: string) => pieces.push({ at: performance.now(), text }));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: pieces.map((p) => p.text).join(''), pieces }),
        );
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

describe('gateway to engine over TLS, through the node’s engine proxy', () => {
  let dir: string;
  let cluster: TlsMaterial;
  let stranger: TlsMaterial;
  let engine: RunningFake;
  let proxy: EngineProxy;
  let endpoint: string;
  let through: Awaited<ReturnType<typeof gatewayOver>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-engine-tls-'));
    cluster = nodeTlsMaterial('cluster');
    stranger = nodeTlsMaterial('stranger');
    engine = await startFakeLlama({
      args: ['--api-key', engineKey, '--parallel', '4'],
      env: { FAKE_LLAMA_TOKEN_MS: '20' },
    });
    proxy = await EngineProxy.start({ host: '127.0.0.1', port: 0, logger: silent });
    proxy.setMaterial(cluster);
    proxy.setRoutes(engineRoutesOf([shard('tiny-1', engine.port)]));
    endpoint = `https://127.0.0.1:${proxy.port}/r/tiny-1`;
    through = await gatewayOver({
      replicas: [replica('tiny-1', endpoint)],
      models: [{ name: 'tiny', adapters: [], engines: ['llamacpp'] }],
      ca: cluster.ca,
    });
  }, 30_000);

  afterAll(async () => {
    await through.gateway.stop();
    await new Promise((resolve) => through.front.close(resolve));
    await proxy.close();
    await engine.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a chat completion through the proxy', async () => {
    const r = await chat(through.url);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-llmgw-replica')).toBe('tiny-1');
    const body = (await r.json()) as { choices: { message: { content: string } }[]; usage: unknown };
    expect(body.choices[0]?.message.content.length).toBeGreaterThan(0);
    expect(body.usage).toMatchObject({ completion_tokens: 4 });
  });

  it('streams a completion through the proxy event by event', async () => {
    const r = await chat(through.url, { stream: true, max_tokens: 6 });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    const arrivals: number[] = [];
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      arrivals.push(performance.now());
      text += Buffer.from(value).toString();
    }
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(events.length).toBeGreaterThanOrEqual(7);
    // Tokens 20 ms apart arrive apart: nothing on the way held them for the end.
    expect((arrivals.at(-1) as number) - (arrivals[0] as number)).toBeGreaterThan(60);
  });

  it('keeps one TLS connection for requests one after another', async () => {
    for (let i = 0; i < 5; i++) expect((await chat(through.url)).status).toBe(200);
    // The gateway's pool to this endpoint holds the one connection, idle between requests.
    const pool = new UpstreamPool(endpoint, { ca: cluster.ca });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      statuses.push(
        await new Promise<number>((resolve, reject) => {
          let status = 0;
          pool.request(
            { method: 'GET', path: '/health', headers: { authorization: `Bearer ${engineKey}` }, body: '' },
            {
              onHead: (s) => (status = s),
              onData: () => undefined,
              onEnd: () => resolve(status),
              onError: reject,
            },
          );
        }),
      );
      expect(pool.connections).toEqual({ busy: 0, idle: 1 });
    }
    expect(statuses).toEqual([200, 200, 200]);
    await pool.close();
  });

  it('passes the engine’s bytes on as they come, unchanged', async () => {
    const pieces = ['data: {"a":1}\n\n', 'data: {"b":"é"}\n\n', 'data: [DONE]\n\n'];
    const sse = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const next = () => {
        if (i === pieces.length) {
          res.end();
          return;
        }
        res.write(pieces[i++]);
        setTimeout(next, 80);
      };
      next();
    });
    await new Promise<void>((resolve) => sse.listen(0, '127.0.0.1', resolve));
    proxy.setRoutes(
      engineRoutesOf([shard('tiny-1', engine.port), shard('sse-1', (sse.address() as AddressInfo).port)]),
    );
    try {
      const r = await viaProxy(proxy.port, {
        path: '/r/sse-1/v1/chat/completions',
        ca: cluster.ca,
        key: engineKey,
        method: 'POST',
        body: '{}',
      });
      expect(r.status).toBe(200);
      expect(r.body).toBe(pieces.join(''));
      expect(r.pieces.length).toBe(pieces.length);
      expect((r.pieces[2]?.at ?? 0) - (r.pieces[0]?.at ?? 0)).toBeGreaterThan(120);
    } finally {
      proxy.setRoutes(engineRoutesOf([shard('tiny-1', engine.port)]));
      await new Promise((resolve) => sse.close(resolve));
    }
  });

  it('refuses a request without the replica’s engine key, saying which key it needs', async () => {
    const r = await viaProxy(proxy.port, { path: '/r/tiny-1/v1/models', ca: cluster.ca, key: 'wrong' });
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body)).toEqual({
      error: {
        message: 'replica tiny-1 takes requests with its engine key only (Authorization: Bearer <key>)',
        type: 'authentication_error',
        code: 401,
      },
    });
    // Not even the engine's open pages are reached without it.
    expect((await viaProxy(proxy.port, { path: '/r/tiny-1/metrics', ca: cluster.ca })).status).toBe(401);
  });

  it('leaves the engine’s own key check in place: a wrong key the proxy lets by is refused by the engine', async () => {
    // A proxy that does not know the key (as if its assignment were stale) forwards it; the engine answers.
    proxy.setRoutes(engineRoutesOf([shard('tiny-1', engine.port, '')]));
    try {
      const wrong = await viaProxy(proxy.port, { path: '/r/tiny-1/v1/models', ca: cluster.ca, key: 'wrong' });
      expect(wrong.status).toBe(401);
      expect(wrong.body).toContain('Invalid API Key');
      const right = await viaProxy(proxy.port, {
        path: '/r/tiny-1/v1/models',
        ca: cluster.ca,
        key: engineKey,
      });
      expect(right.status).toBe(200);
    } finally {
      proxy.setRoutes(engineRoutesOf([shard('tiny-1', engine.port)]));
    }
  });

  it('refuses a replica that does not run on the node, and a path that names none', async () => {
    const gone = await viaProxy(proxy.port, { path: '/r/other-9/v1/models', ca: cluster.ca, key: engineKey });
    expect(gone.status).toBe(503);
    expect(JSON.parse(gone.body).error.message).toBe(
      "replica other-9 does not run on this node (anymore): the gateway's route table is older than its placement, and will change",
    );
    const none = await viaProxy(proxy.port, { path: '/v1/models', ca: cluster.ca, key: engineKey });
    expect(none.status).toBe(404);
    expect(JSON.parse(none.body).error.message).toBe(
      "/v1/models names no replica: the engine proxy forwards /r/<replica>/<path> to that replica's engine",
    );
  });

  it('has the gateway try another replica when the proxy says its replica moved away', async () => {
    const gateway = new Gateway({
      keys,
      routes: {
        routeTable: () =>
          Promise.resolve({
            replicas: [
              replica('gone-1', `https://127.0.0.1:${proxy.port}/r/gone-1`),
              replica('tiny-1', endpoint),
            ],
            models: [{ name: 'tiny', adapters: [], engines: ['llamacpp'] }],
            ca: cluster.ca,
          }),
      },
      usage: { write: () => Promise.resolve() },
      logger: silent,
      retries: 1,
    });
    await gateway.start();
    const front = createServer((req, res) => gateway.handle(nodeRequest(req), res));
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
      for (let i = 0; i < 4; i++) {
        const r = await chat(url, { user: `u${i}` });
        expect(r.status).toBe(200);
        expect(r.headers.get('x-llmgw-replica')).toBe('tiny-1');
      }
    } finally {
      await gateway.stop();
      await new Promise((resolve) => front.close(resolve));
    }
  });

  it('answers a client that does not speak TLS with a refusal that says to', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const s = connect(proxy.port, '127.0.0.1', () =>
        s.write(`GET /r/tiny-1/v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${engineKey}\r\n\r\n`),
      );
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString()));
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    expect(answer).toContain('it speaks TLS only; connect with https://');
    expect(answer).not.toContain('"object":"list"');
    // node:http as a plain client gets the same.
    const plain = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      httpRequest({ host: '127.0.0.1', port: proxy.port, path: '/r/tiny-1/metrics' }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
        .on('error', reject)
        .end();
    });
    expect(plain.status).toBe(400);
  });

  it('scrapes the engine’s metrics through the proxy', async () => {
    await expect
      .poll(() => through.gateway.router.loads().find((l) => l.id === 'tiny-1'), { timeout: 5000 })
      .toMatchObject({ stale: false, reading: { running: expect.any(Number) as number } });
    expect(through.gateway.router.loads().find((l) => l.id === 'tiny-1')?.scrapeError).toBeUndefined();
  });

  describe('a proxy whose certificate another CA issued', () => {
    let impostor: EngineProxy;
    let other: Awaited<ReturnType<typeof gatewayOver>>;

    beforeAll(async () => {
      impostor = await EngineProxy.start({ host: '127.0.0.1', port: 0, logger: silent });
      impostor.setMaterial(stranger);
      impostor.setRoutes(engineRoutesOf([shard('tiny-2', engine.port)]));
      other = await gatewayOver({
        replicas: [replica('tiny-2', `https://127.0.0.1:${impostor.port}/r/tiny-2`)],
        models: [{ name: 'tiny', adapters: [], engines: ['llamacpp'] }],
        ca: cluster.ca,
      });
    });

    afterAll(async () => {
      await other.gateway.stop();
      await new Promise((resolve) => other.front.close(resolve));
      await impostor.close();
    });

    it('is refused by the gateway, which says the certificate does not chain to the cluster CA', async () => {
      const r = await chat(other.url);
      expect(r.status).toBe(502);
      const body = (await r.json()) as { error: { message: string } };
      expect(body.error.message).toContain(
        `every replica of tiny tried failed: tiny-2: 127.0.0.1:${impostor.port}: its certificate does not chain to the cluster CA: refused`,
      );
    });

    it('is not scraped either, and the scrape says why', async () => {
      await expect
        .poll(() => other.gateway.router.loads().find((l) => l.id === 'tiny-2')?.scrapeError, {
          timeout: 5000,
        })
        .toContain('its certificate does not chain to the cluster CA');
    });
  });
});
