import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { llmgw, startDaemon, type Daemon } from './support/cli.js';
import { until } from './support/fleet.js';
import { RawConnection, type RawAnswer } from './support/raw-http.js';

/**
 * `llmgw gateway` with gateway.workers: 2, as a process, against a control plane of this
 * test's own (routes, keys, usage over the API, as the real one serves them) and two tiny
 * engines of capacity 1 that count the requests they hold at once.
 */

interface Engine {
  server: Server;
  url: string;
  running: number;
  most: number;
  served: number;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An engine holding each chat `holdMs`; its llama.cpp metrics say how many it computes. */
async function engine(holdMs: number): Promise<Engine> {
  const e = { running: 0, most: 0, served: 0 } as Engine;
  e.server = createServer((req, res) => {
    if (req.url === '/metrics') {
      res.end(`llamacpp:requests_processing ${e.running}\nllamacpp:requests_deferred 0\n`);
      return;
    }
    req.resume();
    req.on('end', () => {
      e.running++;
      e.most = Math.max(e.most, e.running);
      setTimeout(() => {
        e.running--;
        e.served++;
        const body = JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      }, holdMs);
    });
  });
  e.url = await listen(e.server);
  return e;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const keys: Record<string, { name: string; role: string; rpm: number | null }> = {
  'sk-user-0123456789abcdef': { name: 'user', role: 'user', rpm: null },
  'sk-limited-0123456789abcd': { name: 'limited', role: 'user', rpm: 3 },
  'sk-metrics-0123456789abcd': { name: 'reader', role: 'metrics', rpm: null },
};

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function call(
  url: string,
  o: { key: string; path?: string; body?: unknown; agent?: Agent },
): Promise<Answer> {
  const data = o.body === undefined ? undefined : JSON.stringify(o.body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${o.path ?? '/v1/chat/completions'}`,
      {
        method: data === undefined ? 'GET' : 'POST',
        headers: {
          authorization: `Bearer ${o.key}`,
          ...(data === undefined ? {} : { 'content-type': 'application/json' }),
          // A new connection each, unless an agent keeps one: the kernel picks the worker.
          ...(o.agent === undefined ? { connection: 'close' } : {}),
        },
        ...(o.agent === undefined ? {} : { agent: o.agent }),
      },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const chat = { model: 'm', messages: [{ role: 'user', content: 'hello' }] };
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

interface RouteTableJson {
  models: { name: string; adapters: string[]; engines: string[] }[];
  replicas: unknown[];
}

/** A control plane as the gateway sees one: routes, keys and usage over the API. */
async function fakeControlPlane(
  table: RouteTableJson,
  usage: { key_name: string; model: string; requests: number }[],
): Promise<{ server: Server; url: string }> {
  const byHash = new Map(Object.entries(keys).map(([secret, k]) => [sha(secret), k]));
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (req.url === '/api/v1/whoami') json(200, { name: 'gw', role: 'gateway' });
      else if (req.url === '/api/v1/gateway/routes') json(200, table);
      else if (req.url === '/api/v1/gateway/usage') {
        usage.push(...(JSON.parse(body) as { rows: typeof usage }).rows);
        json(200, {});
      } else if (req.url === '/api/v1/gateway/keys') {
        const k = byHash.get((JSON.parse(body) as { secret_hash: string }).secret_hash);
        if (k === undefined) json(401, { error: { code: 'unauthenticated', message: 'no such key' } });
        else json(200, { name: k.name, role: k.role, allowed_models: null, rpm: k.rpm, tpm: null });
      } else json(404, { error: { code: 'not_found', message: req.url } });
    });
  });
  return { server, url: await listen(server) };
}

/** `llmgw gateway` on 127.0.0.1:0 with these settings, once it listens. */
async function startGateway(
  dir: string,
  cpUrl: string,
  config: string,
): Promise<{ gw: Daemon; url: string }> {
  writeFileSync(join(dir, 'config.yaml'), config);
  const gw = startDaemon(
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
  return { gw, url: /"url":"([^"]+)"/.exec(line[0])?.[1] ?? '' };
}

describe('llmgw gateway with two worker processes', () => {
  let dir: string;
  let cp: Server;
  let engines: Engine[];
  let gw: Daemon;
  let url: string;
  let cpUrl: string;
  const usage: { key_name: string; model: string; requests: number }[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-workers-'));
    engines = [await engine(400), await engine(400)];
    const table = {
      models: [{ name: 'm', adapters: [], engines: ['llamacpp'] }],
      replicas: engines.map((e, i) => ({
        id: `m-${i}`,
        model: 'm',
        engine: 'llamacpp',
        endpoint: e.url,
        apiKey: 'engine-key',
        servedName: 'm',
        adapters: [],
        capacity: 1,
        loadMetrics: { running: 'llamacpp:requests_processing', waiting: 'llamacpp:requests_deferred' },
        metricsUrl: `${e.url}/metrics`,
        healthPath: '/health',
      })),
    };
    ({ server: cp, url: cpUrl } = await fakeControlPlane(table, usage));
    ({ gw, url } = await startGateway(dir, cpUrl, 'gateway: {workers: 2}\n'));
  });

  afterAll(async () => {
    await gw.stop('SIGKILL');
    cp.close();
    for (const e of engines) e.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const workersNow = () =>
    [...gw.output().matchAll(/"pid":(\d+),"msg":"gateway worker listening"/g)].map((m) => Number(m[1]));

  it('answers /v1 from both worker processes, with usage and metrics summed through the primary', async () => {
    const pids = new Set<string>();
    for (let i = 0; i < 40 && pids.size < 2; i++) {
      const a = await call(url, { key: 'sk-user-0123456789abcdef', path: '/v1/models' });
      expect(a.status).toBe(200);
      pids.add(String(a.headers['x-llmgw-worker']));
    }
    expect([...pids].sort()).toEqual(workersNow().map(String).sort());
    const answers = await Promise.all(
      [0, 1].map(() => call(url, { key: 'sk-user-0123456789abcdef', body: chat })),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const metrics = await call(url, { key: 'sk-metrics-0123456789abcd', path: '/metrics' });
    expect(metrics.status).toBe(200);
    // Every worker's /v1/models and chats, counted once: summed over the processes.
    const chats =
      /llmgw_gateway_requests_total\{[^}]*model="m"[^}]*key="user"[^}]*status="200"[^}]*\} (\d+)/.exec(
        metrics.body,
      );
    expect(Number(chats?.[1])).toBe(2);
    const refused = await call(url, { key: 'sk-user-0123456789abcdef', path: '/metrics' });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain(
      'key \\"user\\" has the user role; /metrics needs an admin key or a metrics key',
    );
    // Usage counted in the workers reaches the control plane through the primary.
    const used = () =>
      usage.filter((u) => u.key_name === 'user' && u.model === 'm').reduce((n, u) => n + u.requests, 0);
    await expect.poll(used, { timeout: 5000 }).toBe(2);
  });

  it("holds a key's rpm across workers: the 4th request is refused whichever worker takes it", async () => {
    const answers: Answer[] = [];
    for (let i = 0; i < 4; i++)
      answers.push(await call(url, { key: 'sk-limited-0123456789abcd', body: chat }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
    expect(answers[3]?.body).toContain('key \\"limited\\" made its 3 requests per minute');
  });

  it("counts every worker's requests on a replica: a capacity-1 replica never holds two at once", async () => {
    // Two connections on each worker (a connection stays with the worker that accepted it).
    const byWorker = new Map<string, Agent[]>();
    const spare: Agent[] = [];
    for (let i = 0; i < 40 && [...byWorker.values()].filter((a) => a.length >= 2).length < 2; i++) {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const a = await call(url, { key: 'sk-user-0123456789abcdef', path: '/v1/models', agent });
      const pid = String(a.headers['x-llmgw-worker']);
      const list = byWorker.get(pid) ?? [];
      if (list.length < 2) list.push(agent);
      else spare.push(agent);
      byWorker.set(pid, list);
    }
    const [one, two] = [...byWorker.values()];
    expect(one?.length).toBe(2);
    expect(two?.length).toBe(2);
    for (const e of engines) e.most = 0;
    // Alternating workers, each sent after the last was counted (an IPC hop, well within 100 ms).
    const order = [one?.[0], two?.[0], one?.[1], two?.[1]];
    const sent: Promise<Answer>[] = [];
    for (const agent of order) {
      sent.push(
        call(url, { key: 'sk-user-0123456789abcdef', body: chat, ...(agent === undefined ? {} : { agent }) }),
      );
      await new Promise((r) => setTimeout(r, 100));
    }
    const answers = await Promise.all(sent);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(engines.map((e) => e.most)).toEqual([1, 1]);
    for (const agent of [...byWorker.values()].flat().concat(spare)) agent.destroy();
  });

  it('leaves a signal to the whole group (Ctrl-C, systemd stop) to the primary: a worker signalled serves on', async () => {
    const [signalled] = workersNow();
    if (signalled === undefined) throw new Error('no worker');
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.kill(signalled, signal);
    // A worker that died of it would be restarted at once, and say so.
    await new Promise((r) => setTimeout(r, 1000));
    expect(alive(signalled)).toBe(true);
    expect(gw.output()).not.toMatch(new RegExp(`"pid":${String(signalled)},[^\n]*a gateway worker exited`));
    for (let i = 0; i < 4; i++)
      expect((await call(url, { key: 'sk-user-0123456789abcdef', path: '/v1/models' })).status).toBe(200);
  });

  it('replaces a killed worker and serves on', async () => {
    const [victim] = workersNow();
    process.kill(victim ?? 0, 'SIGKILL');
    await gw.waitFor(/"msg":"a gateway worker exited; it is started again"/);
    await expect.poll(() => workersNow().length, { timeout: 15_000 }).toBe(3);
    for (let i = 0; i < 4; i++)
      expect((await call(url, { key: 'sk-user-0123456789abcdef', path: '/v1/models' })).status).toBe(200);
  });

  it('refuses to start on an address another process listens on, and leaves no worker behind', async () => {
    const taken = new URL(url).host;
    const second = await llmgw(
      [
        'gateway',
        '--server',
        cpUrl,
        '--key',
        'gw-key',
        '--listen',
        taken,
        '--config',
        join(dir, 'config.yaml'),
      ],
      { LLMGW_DATA_DIR: dir },
    );
    expect(second.code).not.toBe(0);
    expect(second.stdout + second.stderr).toContain(
      `cannot listen on ${taken}: bind EADDRINUSE ${taken}: another process listens there; stop it, or set listen: to another port`,
    );
    const started = [
      ...(second.stdout + second.stderr).matchAll(/"pid":(\d+),"msg":"gateway worker listening"/g),
    ];
    expect(started).toEqual([]);
  });

  it('stops its workers with it: no process is left', async () => {
    const pids = workersNow();
    expect(await gw.stop('SIGTERM')).toBe(0);
    await expect.poll(() => pids.filter(alive), { timeout: 5000 }).toEqual([]);
  });
});

describe('llmgw gateway with two worker processes: per-process bounds and answers', () => {
  const max = 4;
  let dir: string;
  let cp: Server;
  let gw: Daemon;
  let port: number;
  const open: RawConnection[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-workers-bounds-'));
    const table = { models: [{ name: 'm', adapters: [], engines: ['llamacpp'] }], replicas: [] };
    let url: string;
    ({ server: cp } = await fakeControlPlane(table, []));
    ({ gw, url } = await startGateway(
      dir,
      `http://127.0.0.1:${(cp.address() as AddressInfo).port}`,
      `gateway: {workers: 2, max_connections_per_client: ${max}}\n`,
    ));
    port = Number(new URL(url).port);
  });
  afterAll(async () => {
    for (const c of open) c.socket.destroy();
    await gw.stop('SIGKILL');
    cp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A new connection with one keep-alive request on it, kept open; its answer. */
  const connectAndAsk = async (): Promise<RawAnswer> => {
    const c = await RawConnection.open('127.0.0.1', port);
    open.push(c);
    await c.write([
      `GET /v1/models HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer sk-user-0123456789abcdef\r\n\r\n`,
    ]);
    return c.answer();
  };

  // Issue 25 item 8: each worker held the bound alone (1,023 accepted with 2 workers for 512).
  it('holds max_connections_per_client for all workers together', async () => {
    for (let accepted = 0; accepted < max; accepted++) {
      const a = await connectAndAsk();
      expect(a.status, a.body).toBe(200);
    }
    // Each worker hears of the other's connections through the primary: waited for, not assumed.
    const refused = await until('a connection past the bound to be refused', async () => {
      const a = await connectAndAsk();
      if (a.status === 200) open.pop()?.socket.destroy();
      return a.status === 503 ? a : undefined;
    });
    expect(JSON.parse(refused.body).error).toMatchObject({
      code: 'too_many_connections',
      message: `127.0.0.1 has ${max} connections open here, the most one address may (gateway.max_connections_per_client): reuse connections (keep-alive) or close some before opening more`,
    });
    // Whichever worker the kernel hands them to: each is refused.
    const more: number[] = [];
    for (let i = 0; i < 20; i++) more.push((await connectAndAsk()).status);
    expect(more).toEqual(Array.from({ length: 20 }, () => 503));
    // One closed: room for one again, on either worker.
    open.shift()?.socket.destroy();
    await until('room for one connection again', async () => {
      const a = await connectAndAsk();
      if (a.status !== 200) open.pop()?.socket.destroy();
      return a.status === 200 ? true : undefined;
    });
  });

  it('answers an upgrade with a JSON error that says it takes none (the agent channel is the control plane’s)', async () => {
    for (const c of open.splice(0)) c.socket.destroy();
    const a = await until('an answer to the upgrade once the connections above are closed', async () => {
      const c = await RawConnection.open('127.0.0.1', port);
      try {
        await c.write([
          'GET /api/v1/agent/connect HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
        ]);
        const answer = await c.answer();
        return answer.status === 503 ? undefined : answer;
      } finally {
        c.socket.destroy();
      }
    });
    expect(a.status).toBe(404);
    expect(a.headers['content-type']).toBe('application/json');
    expect(JSON.parse(a.body).error).toMatchObject({
      code: 'not_found',
      message:
        'no protocol upgrade is served at /api/v1/agent/connect: this server takes none; send other requests without the "Upgrade" and "Connection: upgrade" headers (curl adds them for --http2 on an http:// URL)',
    });
  });
});
