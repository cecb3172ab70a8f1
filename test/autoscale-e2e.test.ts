import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../src/cli/gateway-compose.js';

import { fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { localModel } from './support/local-model.js';
import { enginePorts, until } from './support/fleet.js';

/**
 * Scale to zero through both halves: the gateway's waiting room (its wake and load reports)
 * and the control plane's autoscaler, in one process, a fake llama-server as the engine.
 */
describe('scale to zero, end to end', () => {
  let t: TestControlPlane;
  let agent: TestAgent;
  const auth = () => ({ authorization: `Bearer ${t.adminKey}` });
  const scale = async () => (await api(t.url, t.adminKey, 'GET', '/models/sleepy')).body.status.scale;

  beforeAll(async () => {
    const ports = await enginePorts();
    t = await startControlPlane({
      config: [
        'agent:',
        '  heartbeat_ms: 150',
        '  stop_grace_s: 1',
        `  engines: {llamacpp: {bin: ${fakeLlamaServer}}}`,
        `placement: {ports: ${ports.first}-${ports.last}, cpu_threads: 1}`,
        'autoscale: {interval_s: 0.2, scale_down_window_s: 1, report_ttl_s: 3}',
      ].join('\n'),
    });
    agent = await startTestAgent(t, 'cpu-node');
    await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
    });
  });
  afterAll(async () => {
    await agent.stop();
    await t.stop();
  });

  it('a request wakes a model at zero and gets its answer; the cold start is kept; idle, it goes back to zero', async () => {
    const m = {
      name: 'sleepy',
      source: localModel(),
      replicas: 0,
      autoscale: { min: 0, max: 2, idle_s: 2 },
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, min_memory_gb: 0.1 }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', m)).status).toBe(201);
    const listed = await until('sleepy listed by /v1/models at zero', async () => {
      const b = (await (await fetch(`${t.url}/v1/models`, { headers: auth() })).json()) as {
        data: { id: string; scaled_to_zero?: boolean }[];
      };
      return b.data.find((x) => x.id === 'sleepy');
    });
    expect(listed.scaled_to_zero).toBe(true);

    const r = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sleepy', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.status).toBe(200);
    const cold = await until('the cold start kept', async () => (await scale())?.cold_start);
    expect(cold.ms).toBeGreaterThan(0);
    const zero = await until('back to zero', async () => {
      const s = await scale();
      return s?.replicas === 0 ? s : undefined;
    });
    expect(zero.last_decision).toMatchObject({ from: 1, to: 0, direction: 'zero' });
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=model/sleepy&action=model.scale');
    expect(audit.body.items.map((e: { detail: { direction: string } }) => e.detail.direction)).toEqual([
      'zero',
      'wake',
    ]);
  });
});
