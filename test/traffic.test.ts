import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../src/cli/gateway-compose.js';
import { vllmEngine } from '../src/engines/vllm/vllm-engine.js';
import type { RouteTable } from '../src/protocol/routes.js';
import type { TrafficView } from '../src/protocol/traffic-views.js';

import { fakeVllm, freePort, startFake, type FakeProcess } from './fakes/engines/fake-engines.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { until } from './support/fleet.js';
import { subscribeEvents } from './support/sse.js';

/**
 * GET /api/v1/traffic: a streamed completion through the gateway of the control plane's
 * process, to a fake vLLM, shows in the next sample (taken every 200 ms here, 10 s in use).
 */
describe('GET /api/v1/traffic', () => {
  let t: TestControlPlane;
  let engine: FakeProcess;
  let userKey: string;

  beforeAll(async () => {
    const port = await freePort();
    engine = startFake(fakeVllm, ['serve', 'qwen', '--port', String(port), '--api-key', 'engine-key'], {
      FAKE_VLLM_LOAD_MS: '0',
    });
    await engine.waitFor(/Application startup complete/);
    t = await startControlPlane({ trafficStepMs: 200, events: { minGapMs: 0 } });
    const endpoint = `http://127.0.0.1:${port}`;
    const table: RouteTable = {
      replicas: [
        {
          id: 'chat-1',
          model: 'chat',
          engine: 'vllm',
          endpoint,
          apiKey: 'engine-key',
          servedName: 'qwen',
          adapters: [],
          capacity: 4,
          loadMetrics: vllmEngine.loadMetrics,
          metricsUrl: `${endpoint}/metrics`,
          healthPath: '/health',
        },
      ],
      models: [{ name: 'chat', adapters: [], engines: ['vllm'] }],
    };
    await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
      routes: { routeTable: () => Promise.resolve(table) },
    });
    userKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader', role: 'user' })).body.secret;
  });
  afterAll(async () => {
    await t.stop();
    await engine.stop();
  });

  it('shows a streamed completion: requests, tokens and time to first token, in total and for its model', async () => {
    const events = await subscribeEvents(t.url, t.adminKey);
    // Each sample is told to the console, which reads the series again then.
    await events.next((e) => e.event === 'traffic');
    const before = (await api(t.url, userKey, 'GET', '/traffic')).body as TrafficView;
    expect(before.step_s).toBe(0.2);
    expect(before.gateway).toBe(true);
    expect(before.points.every((p) => p.requests_per_s === 0)).toBe(true);

    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${userKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'chat',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('[DONE]');

    const seen = await until('the completion in the series', async () => {
      const v = (await api(t.url, userKey, 'GET', '/traffic')).body as TrafficView;
      return v.points.some((p) => p.requests_per_s > 0) ? v : undefined;
    });
    const point = seen.points.find((p) => p.requests_per_s > 0);
    // One request in a step of about 0.2 s: timers run late on a busy machine, and Node's may fire a
    // millisecond early against the wall clock (5.025 was seen), so a little over 5 is still one request.
    expect(point?.requests_per_s).toBeGreaterThan(1);
    expect(point?.requests_per_s).toBeLessThanOrEqual(5.5);
    expect(point?.completion_tokens_per_s).toBeGreaterThan(0);
    expect(point?.prompt_tokens_per_s).toBeGreaterThan(0);
    expect(point?.ttft_p50_ms).toBeGreaterThan(0);
    expect(point?.ttft_p95_ms).toBeGreaterThanOrEqual(point?.ttft_p50_ms ?? 0);
    expect(point?.errors_per_s).toBe(0);
    expect(seen.models['chat']?.find((p) => p.t === point?.t)).toEqual(point);

    // Its usage, written to the store, is told to an admin's events.
    await events.next((e) => e.event === 'usage', 20_000);
    events.close();
  });

  it('counts an answer of 400 or more as an error', async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${userKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', messages: 'not a list' }),
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    await until('the error in the series', async () => {
      const v = (await api(t.url, userKey, 'GET', '/traffic')).body as TrafficView;
      return v.points.some((p) => p.errors_per_s > 0) ? true : undefined;
    });
  });

  it('refuses a request without a key', async () => {
    const r = await api(t.url, undefined, 'GET', '/traffic');
    expect(r.status).toBe(401);
    expect(r.body.error.message).toMatch(/Authorization: Bearer/);
  });
});
