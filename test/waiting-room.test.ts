import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import OpenAI from 'openai';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ApiClient } from '../src/client/api-client.js';
import { FailoverClient } from '../src/client/failover-client.js';
import { remoteSignals } from '../src/gateway/control-plane-api.js';
import { mountGateway } from '../src/gateway/mount.js';
import { Gateway } from '../src/gateway/gateway.js';
import type { GatewayKeys } from '../src/gateway/keys.js';
import type { GatewayLoadReport, ScaleSignals, WakeAnswer } from '../src/protocol/load-report.js';
import type { CatalogEntry, RouteReplica, RouteTable } from '../src/protocol/routes.js';
import { HttpServer } from '../src/http1/http-server.js';
import { until } from './support/fleet.js';

/** An engine on 127.0.0.1:0: a chat answer, streamed when asked; metrics in llama.cpp's names. */
async function engine(): Promise<{ server: Server; url: string }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      if (req.url === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n');
        return;
      }
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as { stream?: boolean };
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const word of ['warm', ' now'])
          res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: word } }] })}\n\n`);
        res.end(
          `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } })}\n\ndata: [DONE]\n\n`,
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          choices: [{ index: 0, message: { role: 'assistant', content: 'warm now' } }],
          usage: { prompt_tokens: 3, completion_tokens: 2 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
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
  healthPath: '/health',
});

const keys: GatewayKeys = {
  check: () => Promise.resolve({ name: 'team', role: 'user', allowedModels: null, rpm: null, tpm: null }),
};

const model = (name: string, extra: Partial<CatalogEntry> = {}): CatalogEntry => ({
  name,
  adapters: [],
  engines: ['llamacpp'],
  wakeable: true,
  ...extra,
});

/**
 * Models scaled to zero behind the real front door: `cold` starts ~300 ms after its wake,
 * `never` is woken but never starts (its last failure in the catalog), `nope` is refused
 * by the control plane. The gateway reads its routes every minute on its own: only the
 * waiting room's sooner reads bring `cold`'s replica in.
 */
describe('the waiting room of a model scaled to zero', () => {
  let eng: Awaited<ReturnType<typeof engine>>;
  let table: RouteTable;
  let gateway: Gateway;
  let http: HttpServer;
  let url: string;
  const wakes: string[] = [];
  const reports: GatewayLoadReport[] = [];
  let wakeTimer: NodeJS.Timeout | undefined;

  const signals: ScaleSignals = {
    report: (r) => {
      reports.push(r);
      return Promise.resolve();
    },
    wake: (name): Promise<WakeAnswer> => {
      wakes.push(name);
      if (name === 'nope')
        return Promise.resolve({
          ok: false,
          reason: 'no node has room for it (it needs 1 GPU of class a100-80g)',
        });
      if (name === 'cold' && wakeTimer === undefined)
        wakeTimer = setTimeout(() => {
          table = { ...table, replicas: [...table.replicas, replica('cold-1', 'cold', eng.url)] };
        }, 300);
      return Promise.resolve({ ok: true });
    },
  };

  /** `cold` back at zero, as the autoscaler leaves it after its idle time. */
  const scaleDown = async () => {
    table = { ...table, replicas: table.replicas.filter((r) => r.model !== 'cold') };
    wakeTimer = undefined;
    await gateway.refresh();
  };

  const post = (name: string, o: { stream?: boolean; signal?: AbortSignal; at?: string } = {}) =>
    fetch(`${o.at ?? url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: JSON.stringify({
        model: name,
        messages: [{ role: 'user', content: 'hello' }],
        ...(o.stream === true ? { stream: true } : {}),
      }),
      ...(o.signal === undefined ? {} : { signal: o.signal }),
    });
  const figures = (name: string) => gateway.loadReport().models.find((m) => m.model === name);

  beforeAll(async () => {
    eng = await engine();
    table = {
      replicas: [replica('warm-1', 'warm', eng.url)],
      models: [
        model('cold', { adapters: ['sql'] }),
        model('never', { unavailable: 'its last replica failed: the engine exited with code 1' }),
        model('nope'),
        model('warm', { wakeable: false }),
      ],
    };
    ({ gateway, http, url } = await serve({ maxPerModel: 2, timeoutMs: 800 }));
  });
  afterAll(async () => {
    clearTimeout(wakeTimer);
    await http.close(100);
    await gateway.stop();
    await new Promise((resolve) => eng.server.close(resolve));
  });

  /** A gateway over `table` and `signals` behind the real front door. */
  const serve = async (room: { maxPerModel: number; timeoutMs: number }) => {
    const g = new Gateway({
      keys,
      routes: { routeTable: () => Promise.resolve(table) },
      usage: { write: () => Promise.resolve() },
      logger: pino({ level: 'silent' }),
      refreshMs: 60_000,
      signals,
      reportMs: 100,
      gatewayId: 'gw-test',
      waitingRoom: { ...room, heartbeatMs: 100, refreshMs: 50 },
    });
    await g.start();
    const h = new HttpServer();
    mountGateway(h, g);
    return { gateway: g, http: h, url: await h.listen('127.0.0.1:0') };
  };

  it('answers a request once a replica started, and measures the cold start', async () => {
    const before = Date.now();
    const r = await post('cold');
    expect(r.status).toBe(200);
    expect(
      ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content,
    ).toBe('warm now');
    expect(wakes.filter((w) => w === 'cold')).toHaveLength(1);
    const cold = figures('cold');
    expect(cold?.requests).toBe(1);
    expect(cold?.lastRequestAt).toBeGreaterThanOrEqual(before);
    expect(cold?.lastRequestAt).toBeLessThanOrEqual(Date.now());
    // The replica came 300 ms after the wake.
    expect(cold?.coldStart?.ms).toBeGreaterThanOrEqual(290);
    expect(cold?.coldStart?.at).toBeGreaterThanOrEqual(before);
    expect(cold?.replicas.map((x) => x.id)).toEqual(['cold-1']);
    const text = await gateway.metrics.registry.metrics();
    expect(text).toMatch(/llmgw_gateway_cold_start_seconds_count\{model="cold"\} 1\n/);
    expect(text).toMatch(/llmgw_gateway_waiting_room\{model="cold"\} 0\n/);
    // And the report went to the signals, with the same figures.
    const sent = await until('a report with the cold start', () =>
      reports.find((x) => x.models.some((m) => m.model === 'cold' && m.coldStart !== undefined)),
    );
    expect(sent.gateway).toBe('gw-test');
  });

  it('opens a streamed request at once, sends SSE comments while it waits, then the stream', async () => {
    await scaleDown();
    const r = await post('cold', { stream: true });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const text = await r.text();
    const firstData = text.indexOf('data: ');
    const comments = text
      .slice(0, firstData)
      .match(/^: waiting for a replica of cold to start \([\d.]+ s\)$/gm);
    // One at once, one every 100 ms for the ~300 ms of the start.
    expect(comments?.length).toBeGreaterThanOrEqual(2);
    expect(text.slice(firstData)).toContain('"content":"warm"');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    // The usage the gateway asked for on the client's behalf is dropped as on any stream.
    expect(text).not.toContain('"usage"');
    const text2 = await gateway.metrics.registry.metrics();
    expect(text2).toMatch(/llmgw_gateway_cold_start_seconds_count\{model="cold"\} 2\n/);
  });

  it('streams to the OpenAI client through the comments', async () => {
    await scaleDown();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'cold',
      messages: [{ role: 'user', content: 'hello' }],
      stream: true,
    });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    expect(content).toBe('warm now');
  });

  it('refuses with 503 when no replica came in time, naming the model, the wait and the reason', async () => {
    const r = await post('never');
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('10');
    const body = (await r.json()) as { error: { message: string; type: string; code: string } };
    expect(body.error.type).toBe('service_unavailable');
    expect(body.error.code).toBe('no_ready_replica');
    expect(body.error.message).toMatch(
      /^no replica of never became ready in the [\d.]+ s the request waited \(gateway\.waiting_room\.timeout_s\): its last replica failed: the engine exited with code 1$/,
    );
  });

  it('ends a stream whose wait ran out with an error event', async () => {
    const r = await post('never', { stream: true });
    expect(r.status).toBe(200);
    const text = await r.text();
    expect(text).toMatch(/^: waiting for a replica of never to start \(0 s\)\n\n/);
    const last = text.trimEnd().split('\n\n').at(-1) ?? '';
    expect(last.startsWith('data: ')).toBe(true);
    const event = JSON.parse(last.slice('data: '.length)) as { error: { message: string; code: string } };
    expect(event.error.code).toBe('no_ready_replica');
    expect(event.error.message).toMatch(
      /^no replica of never became ready in the [\d.]+ s the request waited/,
    );
  });

  it('refuses at once past its count, and a client that leaves leaves the room', async () => {
    // Its own gateway, whose waiters wait a minute: they are there until they leave.
    const own = await serve({ maxPerModel: 2, timeoutMs: 60_000 });
    const at = own.url;
    const queued = () => own.gateway.loadReport().models.find((m) => m.model === 'never')?.queued;
    const aborts = [new AbortController(), new AbortController()];
    const waiting = aborts.map((a) => post('never', { signal: a.signal, at }).catch((e: unknown) => e));
    await until('two waiting', () => (queued() === 2 ? true : undefined), 10_000);
    expect(await own.gateway.metrics.registry.metrics()).toMatch(
      /llmgw_gateway_waiting_room\{model="never"\} 2\n/,
    );
    const r = await post('never', { at });
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('5');
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
      'never is scaled to zero and starting, and 2 requests already wait for it (gateway.waiting_room.max_per_model): retry in a few seconds',
    );
    for (const a of aborts) a.abort();
    await Promise.all(waiting);
    await until('the room empty', () => (queued() === 0 ? true : undefined), 10_000);
    expect(await own.gateway.metrics.registry.metrics()).toMatch(
      /llmgw_gateway_waiting_room\{model="never"\} 0\n/,
    );
    // Every request for it counted, the one refused at the door too.
    expect(own.gateway.loadReport().models.find((m) => m.model === 'never')?.requests).toBe(3);
    await own.http.close(100);
    await own.gateway.stop();
  });

  it('refuses every waiter at once with the control plane’s reason when it will not start the model', async () => {
    const r = await post('nope');
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('30');
    expect(((await r.json()) as { error: { message: string } }).error.message).toMatch(
      /^nope is scaled to zero and cannot be started: no node has room for it \(it needs 1 GPU of class a100-80g\) \(the request waited [\d.]+ s\)$/,
    );
    expect(figures('nope')?.queued).toBe(0);
  });

  it('lists models at zero in /v1/models', async () => {
    await scaleDown();
    const r = await fetch(`${url}/v1/models`, { headers: { authorization: 'Bearer k' } });
    const list = (await r.json()) as { data: Record<string, unknown>[] };
    const byId = new Map(list.data.map((m) => [m['id'], m]));
    expect(byId.get('cold')).toMatchObject({ ready_replicas: 0, scaled_to_zero: true });
    expect(byId.get('cold:sql')).toMatchObject({ parent: 'cold', ready_replicas: 0, scaled_to_zero: true });
    expect(byId.get('warm')).toMatchObject({ ready_replicas: 1 });
    expect(byId.get('warm')).not.toHaveProperty('scaled_to_zero');
  });
});

describe('remoteSignals', () => {
  it('posts the load report and the wake to the control plane, and reads its answer', async () => {
    const seen: { method: string; url: string; auth: string | undefined; body: unknown }[] = [];
    let wakeAnswer: unknown = { ok: false, reason: 'autoscale max is 0' };
    const server = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          auth: req.headers.authorization,
          body: JSON.parse(Buffer.concat(parts).toString('utf8')),
        });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(req.url === '/api/v1/gateway/wake' ? wakeAnswer : {}));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const s = remoteSignals(new FailoverClient([new ApiClient({ server: base, key: 'llmgw_key_gw' })]));
      const report: GatewayLoadReport = {
        gateway: 'gw-1',
        at: 1_700_000_000_000,
        models: [
          {
            model: 'cold',
            queued: 3,
            inFlight: 0,
            requests: 7,
            lastRequestAt: 1_699_999_999_000,
            replicas: [],
          },
        ],
      };
      await s.report(report);
      expect(await s.wake('cold')).toEqual({ ok: false, reason: 'autoscale max is 0' });
      wakeAnswer = { ok: true };
      expect(await s.wake('cold')).toEqual({ ok: true });
      wakeAnswer = { started: true };
      await expect(s.wake('cold')).rejects.toThrow(
        'the control plane answered POST /gateway/wake with {"started":true}, not {"ok": true} or {"ok": false, "reason": "..."}: is it an older llmgw?',
      );
      expect(seen[0]).toEqual({
        method: 'POST',
        url: '/api/v1/gateway/load',
        auth: 'Bearer llmgw_key_gw',
        body: report,
      });
      expect(seen[1]).toEqual({
        method: 'POST',
        url: '/api/v1/gateway/wake',
        auth: 'Bearer llmgw_key_gw',
        body: { model: 'cold' },
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
