import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { RouteReplica } from '../protocol/routes.js';

import { nodeRequest } from '../http1/client-io.js';
import { Gateway } from './gateway.js';
import type { GatewayKeys } from './keys.js';

interface Engine {
  server: Server;
  url: string;
  requests: () => number;
  healthChecks: () => number;
}

/**
 * An engine on 127.0.0.1:0 that answers every request with one status and body (or, given
 * `refuses`, only the requests it matches, and 200 to the others), counting them; its /health
 * answers `health`.
 */
async function engine(
  status: number,
  body: string,
  o: { health?: number; refuses?: (request: string) => boolean } = {},
): Promise<Engine> {
  let n = 0;
  let checks = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let request = '';
    req.on('data', (d: Buffer) => (request += d.toString()));
    req.on('end', () => {
      if (req.url === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n');
        return;
      }
      if (req.url === '/health') {
        checks++;
        res.writeHead(o.health ?? 200, { 'content-type': 'application/json' });
        res.end(
          o.health === undefined || o.health === 200
            ? '{"status":"ok"}'
            : '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}',
        );
        return;
      }
      n++;
      const refused = o.refuses === undefined || o.refuses(request);
      res.writeHead(refused ? status : 200, { 'content-type': 'application/json' });
      res.end(refused ? body : ok);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => n,
    healthChecks: () => checks,
  };
}

const ok =
  '{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}';
/** llama-server's answer to an image for a model started without its projector (a 500, in its shape). */
const noVision =
  '{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}';
const failing =
  '{"error":{"code":500,"message":"CUDA error: an illegal memory access was encountered","type":"server_error"}}';

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
  healthPath: '/health',
});

/** Each key is named by its secret. */
const keys: GatewayKeys = {
  check: (secret) =>
    Promise.resolve({ name: secret ?? '-', role: 'user', allowedModels: null, rpm: null, tpm: null }),
};

describe('what the gateway does with an engine’s refusal', () => {
  let engines: Engine[];
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
      engine(500, noVision, { refuses: (request) => request.includes('image_url') }),
      engine(500, failing, { health: 503 }),
      engine(200, ok),
      engine(500, failing),
    ]);
    const [e501, e400, e401, e200, eText, eSick, eWell, eLiar] = engines.map((e) => e.url) as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    gateway = new Gateway({
      keys,
      routes: {
        routeTable: () =>
          Promise.resolve({
            replicas: [
              replica('emb-1', 'emb', e501),
              replica('sg-1', 'sg', e400),
              replica('pair-1', 'pair', e401),
              replica('pair-2', 'pair', e200),
              replica('text-1', 'text', eText),
              replica('sick-1', 'sick', eSick),
              replica('sick-2', 'sick', eWell),
              replica('liar-1', 'liar', eLiar),
              replica('down-1', 'down', eSick),
            ],
            models: ['emb', 'sg', 'pair', 'text', 'sick', 'liar', 'down'].map((name) => ({
              name,
              adapters: [],
              engines: ['llamacpp'],
            })),
          }),
      },
      usage: { write: () => Promise.resolve() },
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

  const post = (model: string, path = '/v1/chat/completions', o: { key?: string; image?: boolean } = {}) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${o.key ?? 'k'}`, 'content-type': 'application/json' },
      body: JSON.stringify(
        path === '/v1/embeddings'
          ? { model, input: Math.random().toString(36) }
          : {
              model,
              messages: [
                {
                  role: 'user',
                  content:
                    o.image === true
                      ? [
                          { type: 'text', text: 'what is this?' },
                          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
                        ]
                      : Math.random().toString(36),
                },
              ],
            },
      ),
    });
  const breaker = (id: string) => gateway.router.loads().find((l) => l.id === id)?.breaker;

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

  it('answers a 5xx of a healthy engine as the caller’s 400 with the engine’s words, once, and keeps the replica in rotation', async () => {
    const text = engines[4] as Engine;
    const before = text.requests();
    // One key's refused requests, more than enough to have opened the breaker before.
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => post('text', undefined, { image: true })),
    );
    for (const r of answers) {
      expect(r.status).toBe(400);
      expect(r.headers.get('x-llmgw-replica')).toBe('text-1');
      expect(await r.json()).toEqual({
        error: {
          message:
            'image input is not supported - hint: if this is unexpected, you may need to provide the mmproj',
          type: 'invalid_request_error',
          param: null,
          code: null,
        },
      });
    }
    // Each tried once, and the six failures shared one health check.
    expect(text.requests() - before).toBe(6);
    expect(text.healthChecks()).toBe(1);
    expect(breaker('text-1')).toBe('closed');
    // Another key's chat is served at once.
    const started = performance.now();
    const other = await post('text', undefined, { key: 'other' });
    expect(other.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('takes a 5xx as the replica’s failure when its health check fails too: tried elsewhere, out of rotation', async () => {
    // Until the failing replica is picked (ties go to chance): its request is then answered by the other.
    for (let i = 0; i < 40 && engines[5]?.requests() === 0; i++) {
      const r = await post('sick');
      expect(r.status).toBe(200);
      expect(r.headers.get('x-llmgw-replica')).toBe('sick-2');
      await r.text();
    }
    expect(engines[5]?.requests()).toBe(1);
    expect(engines[5]?.healthChecks()).toBeGreaterThan(0);
    expect(breaker('sick-1')).not.toBe('closed');
  });

  it('says the engine’s words when every replica tried failed', async () => {
    const r = await post('down');
    expect(r.status).toBe(502);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
      'every replica of down tried failed: down-1 answered 500: CUDA error: an illegal memory access was encountered',
    );
  });

  it('opens the breaker of an engine whose health check answers while it fails everything, once three keys got a 5xx', async () => {
    const liar = engines[7] as Engine;
    for (const key of ['k1', 'k2', 'k1', 'k2']) {
      const r = await post('liar', undefined, { key });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
        'CUDA error: an illegal memory access was encountered',
      );
      expect(breaker('liar-1')).toBe('closed');
    }
    const third = await post('liar', undefined, { key: 'k3' });
    expect(third.status).toBe(400);
    await third.text();
    expect(breaker('liar-1')).toBe('open');
    expect(liar.requests()).toBe(5);
  });
});
