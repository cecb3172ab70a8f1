import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../src/cli/gateway-compose.js';
import type { GatewayLoadReport } from '../src/protocol/load-report.js';

import { fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { localModel } from './support/local-model.js';
import { enginePorts, until } from './support/fleet.js';

/**
 * The autoscaler in a real control plane (SQLite, one agent running fake llama-servers), fed
 * load reports over POST /api/v1/gateway/load as a gateway of its own sends them. Short
 * settings: a decision every 0.2 s, a 1 s scale-down window.
 */
describe('autoscaling on the gateways’ load', () => {
  let t: TestControlPlane;
  let agent: TestAgent;
  const model = (name: string) => ({
    name,
    source: localModel(),
    replicas: 1,
    profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, min_memory_gb: 0.1 }],
  });
  const get = async (name: string) => (await api(t.url, t.adminKey, 'GET', `/models/${name}`)).body;
  const replicaCount = async (name: string) =>
    ((await api(t.url, t.adminKey, 'GET', `/replicas?model=${name}`)).body.items as unknown[]).length;
  /** One gateway's report: every replica of the model as busy as given, and its queue. */
  const report = async (name: string, o: { running: number; queued: number; lastRequestAt?: number }) => {
    const items = (await api(t.url, t.adminKey, 'GET', `/replicas?model=${name}`)).body.items as {
      id: string | null;
    }[];
    const body: GatewayLoadReport = {
      gateway: 'gw-test',
      at: Date.now(),
      models: [
        {
          model: name,
          queued: o.queued,
          inFlight: o.running * items.length,
          requests: 1,
          ...(o.lastRequestAt === undefined ? {} : { lastRequestAt: o.lastRequestAt }),
          replicas: items
            .filter((r) => r.id !== null)
            .map((r) => ({
              id: r.id ?? '',
              running: o.running,
              waiting: 0,
              capacity: 4,
              inFlight: o.running,
              stale: false,
            })),
        },
      ],
    };
    const r = await api(t.url, t.adminKey, 'POST', '/gateway/load', body);
    expect(r.status).toBe(200);
  };
  /** Reports (every 0.2 s, as a gateway does every second) until the model runs `count`. */
  const reportUntil = (name: string, count: number, o: Parameters<typeof report>[1]) =>
    until(`${name} scaled to ${count}`, async () => {
      await report(name, o);
      const m = await get(name);
      return m.status.scale?.replicas === count ? m : undefined;
    });

  beforeAll(async () => {
    const ports = await enginePorts();
    t = await startControlPlane({
      config: [
        'agent:',
        '  heartbeat_ms: 150',
        '  stop_grace_s: 1',
        `  engines: {llamacpp: {bin: ${fakeLlamaServer}}}`,
        `placement: {ports: ${ports.first}-${ports.last}, cpu_threads: 1}`,
        'autoscale: {interval_s: 0.2, scale_down_window_s: 1, scale_up_step: 2, report_ttl_s: 2}',
      ].join('\n'),
    });
    agent = await startTestAgent(t, 'cpu-node');
    expect((await api(t.url, t.adminKey, 'POST', '/models', model('elastic'))).status).toBe(201);
  });
  afterAll(async () => {
    await agent.stop();
    await t.stop();
  });

  it('scales up on a growing queue, down after a quiet window, to zero after idle_s, and a wake brings one back', async () => {
    const put = await api(t.url, t.adminKey, 'PUT', '/models/elastic/autoscale', {
      min: 1,
      max: 3,
      target: 0.5,
      idle_s: 1,
    });
    expect(put.status).toBe(200);
    expect(put.body.autoscale).toEqual({ min: 1, max: 3, target: 0.5, idle_s: 1 });
    expect(put.body.status.scale).toMatchObject({ replicas: 1 });

    // Its one replica's slots full and 8 waiting: (1 + 8/4) / 0.5 = 6 wanted, up by the step of 2 to 3.
    const up = await reportUntil('elastic', 3, { running: 4, queued: 8, lastRequestAt: Date.now() });
    expect(up.status.scale.last_decision).toMatchObject({
      from: 1,
      to: 3,
      direction: 'up',
      figures: { queued: 8, desired: 3 },
    });
    await until('3 replicas placed', async () => ((await replicaCount('elastic')) === 3 ? true : undefined));
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=model/elastic&action=model.scale');
    expect(audit.body.items[0]).toMatchObject({
      actor: 'system',
      detail: { from: 1, to: 3, direction: 'up', figures: { queued: 8 } },
    });

    // Quiet: down to min once the window has passed.
    const down = await reportUntil('elastic', 1, { running: 0, queued: 0, lastRequestAt: Date.now() });
    expect(down.status.scale.last_decision).toMatchObject({ from: 3, to: 1, direction: 'down' });
    expect(down.status.scale.last_decision.reason).toContain('wanted at most over the last 1 s');

    // min 0: the last replica stops after idle_s without a request.
    expect(
      (await api(t.url, t.adminKey, 'PUT', '/models/elastic/autoscale', { min: 0, max: 3, idle_s: 1 }))
        .status,
    ).toBe(200);
    const zero = await reportUntil('elastic', 0, { running: 0, queued: 0 });
    expect(zero.status.scale.last_decision).toMatchObject({ from: 1, to: 0, direction: 'zero' });
    await until('no replica left', async () => ((await replicaCount('elastic')) === 0 ? true : undefined));
    const routes = await api(t.url, t.adminKey, 'GET', '/gateway/routes');
    const entry = routes.body.models.find((m: { name: string }) => m.name === 'elastic');
    expect(entry).toMatchObject({ name: 'elastic', wakeable: true });
    expect(entry.unavailable).toBeUndefined();

    // A request waits in a gateway: a wake starts one at once.
    const wake = await api(t.url, t.adminKey, 'POST', '/gateway/wake', { model: 'elastic' });
    expect(wake.body).toEqual({ ok: true });
    expect((await get('elastic')).status.scale).toMatchObject({
      replicas: 1,
      last_decision: { from: 0, to: 1, direction: 'wake' },
    });
    await until('a replica ready again', async () =>
      (
        (await api(t.url, t.adminKey, 'GET', '/replicas?model=elastic')).body.items as { state: string }[]
      ).some((r) => r.state === 'ready')
        ? true
        : undefined,
    );

    // Each decision counted on the gateway's /metrics.
    await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
    });
    const metrics = await (
      await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${t.adminKey}` } })
    ).text();
    for (const line of [
      'llmgw_autoscaler_decisions_total{model="elastic",direction="up"} 1',
      'llmgw_autoscaler_decisions_total{model="elastic",direction="down"} 1',
      'llmgw_autoscaler_decisions_total{model="elastic",direction="zero"} 1',
      'llmgw_autoscaler_decisions_total{model="elastic",direction="wake"} 1',
      'llmgw_model_replicas_desired{model="elastic"} 1',
    ])
      expect(metrics).toContain(line);
    expect(metrics).toMatch(/llmgw_replicas\{model="elastic",state="(ready|starting)"\} 1/);

    // --off: back to a fixed count, the one it runs now.
    const off = await api(t.url, t.adminKey, 'DELETE', '/models/elastic/autoscale');
    expect(off.status).toBe(200);
    expect(off.body.autoscale).toBeUndefined();
    expect(off.body.replicas).toBe(1);
  });

  it('refuses a wake it cannot honour, and load reports that are not one, naming why', async () => {
    const fixed = await api(t.url, t.adminKey, 'POST', '/gateway/wake', { model: 'elastic' });
    expect(fixed.body).toEqual({
      ok: false,
      reason:
        'model elastic is not autoscaled, so it is never scaled to zero: give it autoscale with min: 0 (llmgw ctl model autoscale elastic --min 0 --max N)',
    });
    const gpuOnly = {
      ...model('nowhere'),
      replicas: 0,
      autoscale: { min: 0, max: 2 },
      profiles: [{ name: 'l4', engine: 'llamacpp', gpu_class: 'l4-24g' }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', gpuOnly)).status).toBe(201);
    const nowhere = await api(t.url, t.adminKey, 'POST', '/gateway/wake', { model: 'nowhere' });
    expect(nowhere.body.ok).toBe(false);
    expect(nowhere.body.reason).toMatch(/^no replica of nowhere can start: .*l4-24g/);
    expect((await api(t.url, t.adminKey, 'POST', '/gateway/wake', { model: 'nope' })).body).toEqual({
      ok: false,
      reason: 'model "nope" does not exist',
    });

    const bad = await api(t.url, t.adminKey, 'POST', '/gateway/load', { gateway: 'g', at: 1, models: [{}] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('models[0].model');
    const user = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'someone', role: 'user' })).body
      .secret;
    const denied = await api(t.url, user, 'POST', '/gateway/wake', { model: 'nowhere' });
    expect(denied.status).toBe(403);
    expect(denied.body.error.message).toContain('this is for gateways: key "someone" has the user role');

    // A fixed count is refused on an autoscaled model, and --off on one that is not.
    const scale = await api(t.url, t.adminKey, 'POST', '/models/nowhere/scale', { replicas: 2 });
    expect(scale.status).toBe(409);
    expect(scale.body.error.message).toBe(
      'model nowhere is autoscaled between 0 and 2 replicas: change the bounds with llmgw ctl model autoscale nowhere --min N --max N, or run a fixed count with llmgw ctl model autoscale nowhere --off first',
    );
    const notScaled = await api(t.url, t.adminKey, 'DELETE', '/models/elastic/autoscale');
    expect(notScaled.status).toBe(409);
    expect(notScaled.body.error.message).toBe(
      'model elastic is not autoscaled: it runs a fixed count (llmgw ctl model scale elastic N changes it)',
    );
    const badBounds = await api(t.url, t.adminKey, 'PUT', '/models/elastic/autoscale', { min: 3, max: 1 });
    expect(badBounds.status).toBe(400);
    expect(badBounds.body.error.message).toContain('min (3) is more than max (1): write min: 1 or less');
  });
});
