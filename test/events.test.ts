import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { until } from './support/fleet.js';
import { subscribeEvents, type SseClient } from './support/sse.js';

const qwen = {
  name: 'qwen-7b',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 8192,
  profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g', tp: 2 }],
};

/** GET /api/v1/events over real HTTP: what changes reach a subscribed key, by its role. */
describe('GET /api/v1/events', () => {
  let t: TestControlPlane;
  let userKey: string;
  let metricsKey: string;
  const agents: TestAgent[] = [];
  const clients: SseClient[] = [];

  beforeAll(async () => {
    t = await startControlPlane({ events: { heartbeatMs: 200, minGapMs: 50 } });
    userKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader', role: 'user' })).body.secret;
    metricsKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'scraper', role: 'metrics' })).body
      .secret;
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    for (const a of agents) await a.stop();
    await t.stop();
  });

  const subscribe = async (key: string | undefined) => {
    const c = await subscribeEvents(t.url, key);
    clients.push(c);
    return c;
  };

  it('refuses a request without a key (401) and a metrics key (403), with the fix in the message', async () => {
    const none = await api(t.url, undefined, 'GET', '/events');
    expect(none.status).toBe(401);
    expect(none.body.error.message).toMatch(/Authorization: Bearer/);
    const metrics = await api(t.url, metricsKey, 'GET', '/events');
    expect(metrics.status).toBe(403);
    expect(metrics.body.error.message).toBe(
      'key "scraper" has the metrics role, which reads /metrics only: use a user or admin key for the API',
    );
    expect(t.cp.events.size).toBe(0);
  });

  it('tells an admin key of a key created, a model added and a node that joined; a user key only what it may read', async () => {
    const admin = await subscribe(t.adminKey);
    const user = await subscribe(userKey);
    expect(admin.status).toBe(200);
    expect(admin.contentType).toMatch(/^text\/event-stream/);
    const ready = await admin.next((e) => e.event === 'ready');
    expect(ready.data).toEqual({
      topics: ['nodes', 'replicas', 'models', 'rollouts', 'traffic', 'keys', 'config', 'usage'],
    });
    expect(admin.events[0]).toMatchObject({ retry: 3000 });
    expect((await user.next((e) => e.event === 'ready')).data).toEqual({
      topics: ['nodes', 'replicas', 'models', 'rollouts', 'traffic'],
    });
    await until('both subscribed', () => (t.cp.events.size === 2 ? true : undefined));

    expect((await api(t.url, t.adminKey, 'POST', '/keys', { name: 'ci', role: 'user' })).status).toBe(201);
    // Keys made just before (in beforeAll) may come in the same batch: the one made now is named.
    const created = await admin.next(
      (e) => e.event === 'keys' && (e.data as { keys: string[] }).keys.includes('ci'),
    );
    expect(created.data).toMatchObject({ keys: expect.arrayContaining(['ci']) as unknown });

    expect((await api(t.url, t.adminKey, 'POST', '/models', qwen)).status).toBe(201);
    await admin.next((e) => e.event === 'models');
    await user.next((e) => e.event === 'models');
    // No L4 anywhere: the model waits for room, a change of the replicas' view.
    const pending = await user.next(
      (e) => e.event === 'replicas' && (e.data as { models: string[] }).models.includes('qwen-7b'),
    );
    expect(pending.data).toEqual({ replicas: [], models: ['qwen-7b'] });

    agents.push(await startTestAgent(t, 'node-a'));
    const joined = await user.next(
      (e) => e.event === 'nodes' && (e.data as { nodes: string[] }).nodes.includes('node-a'),
    );
    expect(joined.data).toEqual({ nodes: ['node-a'] });

    const settings = await fetch(`${t.url}/api/v1/config`, {
      headers: { authorization: `Bearer ${t.adminKey}` },
    });
    const put = await fetch(`${t.url}/api/v1/config`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/yaml' },
      body: `${await settings.text()}\n# edited\n`,
    });
    expect(put.status).toBe(200);
    expect((await admin.next((e) => e.event === 'config')).data).toEqual({});

    // The user's stream went on the whole time, without the admin topics.
    expect(user.events.map((e) => e.event)).not.toContain('keys');
    expect(user.events.map((e) => e.event)).not.toContain('config');
    admin.close();
    user.close();
  });

  it('sends a heartbeat comment, and removes a subscriber that went away', async () => {
    const c = await subscribe(t.adminKey);
    await c.next((e) => e.event === 'ready');
    await until('subscribed', () => (t.cp.events.size === 1 ? true : undefined));
    expect((await c.next((e) => e.event === 'comment')).data).toBe('heartbeat');
    c.close();
    await until('the subscriber removed', () => (t.cp.events.size === 0 ? true : undefined));
  });
});

describe('GET /api/v1/events when the server stops', () => {
  it('ends the stream, and the stop does not wait for it', async () => {
    const t = await startControlPlane();
    const c = await subscribeEvents(t.url, t.adminKey);
    await c.next((e) => e.event === 'ready');
    const started = Date.now();
    await t.stop();
    await c.ended;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(t.cp.events.size).toBe(0);
  });
});
