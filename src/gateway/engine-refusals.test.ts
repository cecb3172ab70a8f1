import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { RouteReplica } from '../protocol/routes.js';

import { nodeRequest } from '../http1/client-io.js';
import { Gateway } from './gateway.js';
import type { GatewayKeys } from './keys.js';

/** An engine on 127.0.0.1:0 that answers every request with one status and body, counting them. */
async function engine(
  status: number,
  body: string,
): Promise<{ server: Server; url: string; requests: () => number }> {
  let n = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n');
        return;
      }
      n++;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => n };
}

const replica = (id: string, model: string, endpoint: string): RouteReplica => ({
  id,
  model,
  engine: 'llamacpp',
  endpoint,
  apiKey: 'engine-key',
  servedName: model,
  adapters: [],
  capacity: 4,
  loadMetrics: { running: 'llamacpp:requests_processing', waiting: 'llamacpp:requests_deferred' },
  metricsUrl: `${endpoint}/metrics`,
});

const keys: GatewayKeys = {
  check: () => Promise.resolve({ name: 'team', role: 'user', allowedModels: null, rpm: null, tpm: null }),
};

describe('what the gateway does with an engine’s refusal', () => {
  const ok =
    '{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}';
  let engines: Awaited<ReturnType<typeof engine>>[];
  let gateway: Gateway;
  let front: Server;
  let url: string;

  beforeAll(async () => {
    engines = await Promise.all([
      engine(
        501,
        '{"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}}',
      ),
      engine(
        400,
        '{"object":"error","message":"messages: Field required","type":"BadRequestError","param":null,"code":400}',
      ),
      engine(401, '{"error":"Unauthorized"}'),
      engine(200, ok),
    ]);
    const [e501, e400, e401, e200] = engines.map((e) => e.url) as [string, string, string, string];
    gateway = new Gateway({
      keys,
      routes: () =>
        Promise.resolve({
          replicas: [
            replica('emb-1', 'emb', e501),
            replica('sg-1', 'sg', e400),
            replica('pair-1', 'pair', e401),
            replica('pair-2', 'pair', e200),
          ],
          models: ['emb', 'sg', 'pair'].map((name) => ({ name, adapters: [], engines: ['llamacpp'] })),
        }),
      usage: () => Promise.resolve(),
      logger: pino({ level: 'silent' }),
    });
    await gateway.start();
    front = createServer((req, res) => gateway.handle(nodeRequest(req), res));
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await gateway.stop();
    for (const s of [front, ...engines.map((e) => e.server)])
      await new Promise((resolve) => s.close(resolve));
  });

  const post = (model: string, path = '/v1/chat/completions') =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: Math.random().toString(36) }] }),
    });

  it('passes a 501 on with the engine’s message and code, once, and keeps the replica in rotation', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await post('emb', '/v1/embeddings');
      expect(r.status).toBe(501);
      expect(r.headers.get('x-should-retry')).toBe('false');
      expect(await r.json()).toEqual({
        error: {
          message: 'This server does not support embeddings. Start it with `--embeddings`',
          type: 'not_supported_error',
          param: null,
          code: 501,
        },
      });
    }
    expect(engines[0]?.requests()).toBe(5);
    expect(gateway.router.loads().find((l) => l.id === 'emb-1')?.breaker).toBe('closed');
  });

  it('passes SGLang’s 400 on in OpenAI’s shape', async () => {
    const r = await post('sg');
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({
      error: { message: 'messages: Field required', type: 'BadRequestError', param: null, code: 400 },
    });
    expect(gateway.router.loads().find((l) => l.id === 'sg-1')?.breaker).toBe('closed');
  });

  it('takes an engine’s 401 as its own failure (our key for it is wrong): another replica answers', async () => {
    // Whichever replica is picked (ties go to chance; each request its own conversation), the client gets the answer of the one whose key works.
    for (let i = 0; i < 3 || (i < 40 && engines[2]?.requests() === 0); i++) {
      const r = await post('pair');
      expect(r.status).toBe(200);
      expect(r.headers.get('x-llmgw-replica')).toBe('pair-2');
      await r.text();
    }
    expect(engines[2]?.requests()).toBeGreaterThan(0);
    expect(gateway.router.loads().find((l) => l.id === 'pair-1')?.breaker).not.toBe('closed');
  });
});
