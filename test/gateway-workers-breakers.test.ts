import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startDaemon, type Daemon } from './support/cli.js';
import { routeReplica } from './support/route-replica.js';

/**
 * `llmgw gateway` with gateway.workers: 2, against a control plane of this test's own, and
 * two engines: `m-a` answers; `m-b` answers 500 while its health check answers 503 (it is
 * failing, not the request), and after its first request its metrics fail too, so only a
 * request it answered could close its breaker. The worker that sent it a request opened
 * the breaker; the others follow the primary's board: one state per replica, in /metrics.
 */

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const ok = JSON.stringify({
  id: 'x',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
});

/** An engine; `failing`: chats answer 500, /health 503, and /metrics 503 once it had a chat. */
async function engine(failing: boolean): Promise<{ server: Server; url: string; chats: () => number }> {
  let chats = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/metrics' && !(failing && chats > 0)) {
        res.end('llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n');
        return;
      }
      if (req.url === '/health' && !failing) {
        res.end('{"status":"ok"}');
        return;
      }
      if (req.url === '/v1/chat/completions') chats++;
      const status = !failing ? 200 : req.url === '/v1/chat/completions' ? 500 : 503;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        status === 200 ? ok : `{"error":{"code":${status},"message":"out of memory","type":"server_error"}}`,
      );
    });
  });
  const url = await listen(server);
  return { server, url, chats: () => chats };
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const keys: Record<string, { name: string; role: string }> = {
  'sk-user-0123456789abcdef': { name: 'user', role: 'user' },
  'sk-metrics-0123456789abcd': { name: 'reader', role: 'metrics' },
};

function call(
  url: string,
  key: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: string }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      {
        method: data === undefined ? 'GET' : 'POST',
        // A new connection each: the kernel picks the worker.
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** The breaker states /metrics gives a replica (those at 1). */
function statesOf(metrics: string, replica: string): string[] {
  return [...metrics.matchAll(/llmgw_gateway_replica_state\{([^}]*)\} 1/g)]
    .map((m) => m[1] ?? '')
    .filter((labels) => labels.includes(`replica="${replica}"`))
    .map((labels) => /state="([^"]+)"/.exec(labels)?.[1] ?? '')
    .filter((state) => state !== 'stale');
}

describe('the breakers of a gateway with two worker processes', () => {
  let dir: string;
  let cp: Server;
  let good: Awaited<ReturnType<typeof engine>>;
  let bad: Awaited<ReturnType<typeof engine>>;
  let gw: Daemon;
  let url: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-breakers-'));
    good = await engine(false);
    bad = await engine(true);
    const table = {
      models: [{ name: 'm', adapters: [], engines: ['llamacpp'] }],
      replicas: [
        ['m-a', good.url],
        ['m-b', bad.url],
      ].map(([id, endpoint]) => routeReplica(id ?? '', { endpoint, capacity: 4, apiKey: 'engine-key' })),
    };
    const byHash = new Map(Object.entries(keys).map(([secret, k]) => [sha(secret), k]));
    cp = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const json = (status: number, value: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(value));
        };
        if (req.url === '/api/v1/whoami') json(200, { name: 'gw', role: 'gateway' });
        else if (req.url === '/api/v1/gateway/routes') json(200, table);
        else if (req.url === '/api/v1/gateway/keys') {
          const k = byHash.get((JSON.parse(body) as { secret_hash: string }).secret_hash);
          if (k === undefined) json(401, { error: { code: 'unauthenticated', message: 'no such key' } });
          else json(200, { name: k.name, role: k.role, allowed_models: null, rpm: null, tpm: null });
        } else json(200, {});
      });
    });
    const cpUrl = await listen(cp);
    writeFileSync(join(dir, 'config.yaml'), 'gateway: {workers: 2}\n');
    gw = startDaemon(
      [
        'gateway',
        '--server',
        cpUrl,
        '--key',
        'gw-key',
        '--listen',
        '127.0.0.1:0',
        '--config',
        join(dir, 'config.yaml'),
      ],
      { LLMGW_DATA_DIR: dir },
    );
    const line = await gw.waitFor(/^.*"msg":"gateway listening".*$/m);
    url = /"url":"([^"]+)"/.exec(line[0])?.[1] ?? '';
  });

  afterAll(async () => {
    await gw.stop('SIGKILL');
    for (const s of [cp, good.server, bad.server]) {
      s.closeAllConnections();
      s.close();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('opens a failing replica’s breaker in every process at once: /metrics shows one state per replica', async () => {
    const metrics = () => call(url, 'sk-metrics-0123456789abcd', '/metrics');
    await expect
      .poll(async () => statesOf((await metrics()).body, 'm-b'), { timeout: 10_000 })
      .toEqual(['closed']);
    // Chats until one reaches m-b (ties go to chance): it is retried on m-a, and the client never sees the failure.
    for (let i = 0; i < 60 && bad.chats() === 0; i++) {
      const r = await call(url, 'sk-user-0123456789abcdef', '/v1/chat/completions', {
        model: 'm',
        messages: [{ role: 'user', content: `hi ${i}` }],
      });
      expect(r.status).toBe(200);
    }
    expect(bad.chats()).toBe(1);
    // One worker saw it fail; every process holds the same breaker, so the sum of them says one thing.
    for (let i = 0; i < 5; i++) {
      const text = (await metrics()).body;
      expect(statesOf(text, 'm-b')).toHaveLength(1);
      expect(statesOf(text, 'm-b')[0]).not.toBe('closed');
      expect(statesOf(text, 'm-a')).toEqual(['closed']);
    }
  });
});
