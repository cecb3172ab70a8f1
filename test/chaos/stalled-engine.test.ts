import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import OpenAI from 'openai';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../../src/cli/gateway-compose.js';
import { llamacppEngine } from '../../src/engines/llamacpp/llamacpp-engine.js';
import type { RouteReplica, RouteTable } from '../../src/protocol/routes.js';
import { sseData, startFakeLlama, type RunningFake } from '../fakes/engines/fake-engines.js';
import { api, startControlPlane, type TestControlPlane } from '../support/control-plane.js';
import { until } from '../support/fleet.js';

import { chaosReport } from './chaos.js';

// Issue 14 item 5: a slow or stalled engine (it answers its head and then nothing): the client
// gets a timeout error in OpenAI's shape, not a hang, and the replica leaves rotation until it
// answers again. Two replicas of one model: `a` stalls while its file exists, `b` is healthy.

const idleS = 1;

describe('a stalled engine', () => {
  let dir: string;
  let stallFile: string;
  let a: RunningFake;
  let b: RunningFake;
  let t: TestControlPlane;
  let key: string;

  const replica = (id: string, engine: RunningFake): RouteReplica => ({
    id,
    model: 'chat',
    engine: 'llamacpp',
    endpoint: engine.url,
    apiKey: 'engine-key',
    servedName: 'chat',
    adapters: [],
    capacity: 4,
    loadMetrics: llamacppEngine.loadMetrics,
    metricsUrl: `${engine.url}/metrics`,
    healthPath: '/health',
  });
  let sent = 0;
  /** Each request a conversation of its own: none is kept on a replica by affinity. */
  const chat = (stream = false) =>
    fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'chat',
        messages: [{ role: 'user', content: `hi ${sent++}` }],
        max_tokens: 2,
        stream,
      }),
    });
  /** One non-streamed request: who answered (the replica, from its header or the error's message), how, and how long it took. */
  const one = async () => {
    const started = Date.now();
    const res = await chat();
    const body = (await res.json()) as { error?: { message: string; type: string; code: string } };
    const replicaId =
      res.headers.get('x-llmgw-replica') ?? /replica (\S+) of/.exec(body.error?.message ?? '')?.[1];
    return { status: res.status, body, replica: replicaId, ms: Date.now() - started };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-stall-'));
    stallFile = join(dir, 'stall');
    const args = ['--parallel', '4', '--api-key', 'engine-key'];
    a = await startFakeLlama({ args, env: { FAKE_LLAMA_TOKEN_MS: '0', FAKE_LLAMA_STALL_FILE: stallFile } });
    b = await startFakeLlama({ args, env: { FAKE_LLAMA_TOKEN_MS: '0' } });
    t = await startControlPlane({ config: `gateway: {upstream_idle_timeout_s: ${idleS}}\n` });
    const table: RouteTable = {
      replicas: [replica('a', a), replica('b', b)],
      models: [{ name: 'chat', adapters: [], engines: ['llamacpp'] }],
    };
    await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
      routes: { routeTable: () => Promise.resolve(table) },
    });
    key = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'stall-user', role: 'user' })).body.secret;
  });
  afterAll(async () => {
    await t.stop();
    await a.stop();
    await b.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a non-streamed request 504 in OpenAI shape, takes the replica out of rotation, and back once it answers', async () => {
    writeFileSync(stallFile, '');
    // Until the router sends one to a: the others are b's, answered at once.
    let timedOut: Awaited<ReturnType<typeof one>> | undefined;
    let healthyBefore = 0;
    for (let i = 0; i < 50 && timedOut === undefined; i++) {
      const r = await one();
      if (r.status === 200) {
        expect(r.replica).toBe('b');
        healthyBefore++;
      } else timedOut = r;
    }
    expect(timedOut?.status).toBe(504);
    expect(timedOut?.body.error).toMatchObject({ type: 'timeout_error', code: 'upstream_timeout' });
    expect(timedOut?.body.error?.message).toMatch(
      /replica a of chat sent nothing for 1 s \(gateway\.upstream_idle_timeout_s\).*send the request again/,
    );
    // The limit, not a hang.
    expect(timedOut?.ms).toBeGreaterThanOrEqual(idleS * 1000 - 50);
    expect(timedOut?.ms).toBeLessThan(idleS * 1000 + 3000);

    // Out of rotation: the next requests go to b (a's metrics still answer; they do not bring it back).
    // Well within the first cooldown (1 s), after which a trial request would go to a.
    const after = 10;
    let toB = 0;
    for (let i = 0; i < after; i++) {
      const r = await one();
      if (r.status === 200 && r.replica === 'b') toB++;
    }

    // It answers again: a trial request after its cooldown finds it, and it serves again.
    unlinkSync(stallFile);
    const back = await until(
      'replica a back in rotation',
      async () => {
        const r = await one();
        return r.status === 200 && r.replica === 'a' ? r : undefined;
      },
      20_000,
    );
    chaosReport(
      'stalled-engine',
      {
        idleTimeoutS: idleS,
        beforeStall: healthyBefore,
        timeoutMs: timedOut?.ms ?? -1,
        afterStall: after,
        back: back.replica ?? '',
      },
      { notRerouted: after - toB },
    );
    expect(toB).toBe(after);
  });

  it('ends a stream already open with an error event in OpenAI shape', async () => {
    writeFileSync(stallFile, '');
    try {
      let text: string | undefined;
      let healthy = 0;
      for (let i = 0; i < 50 && text === undefined; i++) {
        const res = await chat(true);
        expect(res.status).toBe(200);
        const body = await res.text();
        if (res.headers.get('x-llmgw-replica') === 'a') text = body;
        else healthy++;
      }
      expect(text, `a never chosen in ${healthy} streams`).toBeDefined();
      const events = sseData(text ?? '');
      // Its first event came through, then the error as the last event, and no [DONE].
      expect(events.length).toBeGreaterThanOrEqual(2);
      expect(events.at(-1)).toMatchObject({
        error: {
          type: 'timeout_error',
          code: 'upstream_timeout',
          message: expect.stringMatching(/replica a of chat sent nothing/),
        },
      });
      expect(events).not.toContain('[DONE]');

      // OpenAI's own client sees the error (it throws it from the stream), not a hang.
      unlinkSync(stallFile);
      await until(
        'a back in rotation',
        async () => ((await one()).replica === 'a' ? true : undefined),
        20_000,
      );
      writeFileSync(stallFile, '');
      const client = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: key, maxRetries: 0 });
      let thrown: unknown;
      for (let i = 0; i < 50 && thrown === undefined; i++) {
        try {
          const stream = await client.chat.completions.create({
            model: 'chat',
            messages: [{ role: 'user', content: `hi ${sent++}` }],
            max_tokens: 2,
            stream: true,
          });
          for await (const _ of stream) {
            // Drained: b's stream ends; a's throws.
          }
        } catch (e) {
          thrown = e;
        }
      }
      expect(thrown).toBeInstanceOf(OpenAI.APIError);
      expect((thrown as InstanceType<typeof OpenAI.APIError>).message).toMatch(
        /replica a of chat sent nothing/,
      );
    } finally {
      rmSync(stallFile, { force: true });
    }
  });
});
