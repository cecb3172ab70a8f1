import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startLocalGateway } from '../../src/cli/gateway-compose.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import { fakeLlamaServer } from '../fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from '../support/agents.js';
import { api, startControlPlane, type TestControlPlane } from '../support/control-plane.js';
import { enginePorts, until } from '../support/fleet.js';
import { localModel } from '../support/local-model.js';

import { chaosReport, scaled } from './chaos.js';

// Issue 25 item 2: the engine restarts with a queue. One CPU replica of one model (4 slots) on
// a test agent, with the fake llama-server. Its engine is stopped (SIGSTOP, by the pid the
// agent reports), chats are sent (4 go into the engine, the rest wait in the gateway's queue),
// then it is killed (SIGKILL). The 4 inside the engine get 502, as they must; the queued ones
// wait for the agent's supervisor to start it again and are answered by it (before the fix:
// `503 … restarting in 1 s` with `x-should-retry: false`). Under `npm test` one round of 20
// chats, the issue's own; under `npm run chaos` more rounds, each restart's backoff longer.

interface Answer {
  status: number;
  body: string;
  retryAfter: string | null;
  shouldRetry: string | null;
}

describe('an engine restarting with requests queued for it', () => {
  let dir: string;
  let t: TestControlPlane;
  let gateway: Gateway;
  let key: string;
  let agent: TestAgent | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-engine-restart-queue-'));
    const ports = await enginePorts();
    t = await startControlPlane({
      config: [
        `placement: {ports: ${ports.first}-${ports.last}}`,
        'agent:',
        '  heartbeat_ms: 200',
        '  stop_grace_s: 2',
        '  engines:',
        `    llamacpp: {bin: ${fakeLlamaServer}, parallel: 4}`,
      ].join('\n'),
    });
    agent = await startTestAgent(t, 'node-a');
    gateway = await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
    });
    key = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'queued', role: 'user' })).body.secret;
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'm',
      source: localModel(dir),
      replicas: 1,
      context_length: 2048,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    await until(
      'a ready replica of m in the gateway',
      () =>
        t.cp.fleet.replicas('m').some((r) => r.state === 'ready') && gateway.router.replicaCount('m') === 1
          ? true
          : undefined,
      60_000,
    );
  });
  afterAll(async () => {
    await agent?.stop();
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function chat(n: number): Promise<Answer> {
    try {
      const res = await fetch(`${t.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'm',
          messages: [{ role: 'user', content: `chat ${n}` }],
          max_tokens: 4,
        }),
      });
      return {
        status: res.status,
        body: await res.text(),
        retryAfter: res.headers.get('retry-after'),
        shouldRetry: res.headers.get('x-should-retry'),
      };
    } catch (e) {
      return {
        status: 0,
        body: e instanceof Error ? e.message : String(e),
        retryAfter: null,
        shouldRetry: null,
      };
    }
  }

  it('answers every queued request from the restarted engine, within the queue timeout', async () => {
    const rounds = scaled(1, 5);
    const perRound = scaled(20, 100);
    const totals = { sent: 0, inEngine: 0, queued: 0, answered: 0, failed: 0, queuedFailed: 0 };
    const readyMs: number[] = [];
    const failures: string[] = [];
    for (let round = 0; round < rounds; round++) {
      const victim = await until(
        'the ready replica and its engine pid',
        () => {
          const r = t.cp.fleet.replicas('m').find((x) => x.state === 'ready');
          const pid = r?.shards[0]?.pid;
          return r !== undefined && pid !== undefined && gateway.router.replicaCount('m') === 1
            ? { id: r.id, pid, restarts: r.restarts }
            : undefined;
        },
        60_000,
      );
      process.kill(victim.pid, 'SIGSTOP');
      let answers: Promise<Answer[]>;
      let inEngine: number;
      let queued: number;
      try {
        answers = Promise.all(Array.from({ length: perRound }, (_, i) => chat(totals.sent + i)));
        totals.sent += perRound;
        // Every request in: as many in the stopped engine as it has slots, the rest in the queue.
        ({ inEngine, queued } = await until('the chats in the engine and the queue', () => {
          const held = { inEngine: gateway.router.inFlight('m'), queued: gateway.router.queued('m') };
          return held.inEngine + held.queued === perRound ? held : undefined;
        }));
      } finally {
        process.kill(victim.pid, 'SIGKILL');
      }
      const killedAt = performance.now();
      const ready = until(
        `replica ${victim.id} ready again after its engine (pid ${victim.pid}) was killed`,
        () => {
          const r = t.cp.fleet.replicas('m').find((x) => x.id === victim.id);
          return r?.state === 'ready' && r.restarts > victim.restarts && r.shards[0]?.pid !== victim.pid
            ? performance.now() - killedAt
            : undefined;
        },
        60_000,
      );
      const got = await answers;
      readyMs.push(await ready);
      const ok = got.filter(
        (a) => a.status === 200 && (JSON.parse(a.body) as { choices?: unknown[] }).choices?.length === 1,
      );
      const failed = got.filter((a) => !ok.includes(a));
      for (const a of failed)
        failures.push(
          `round ${round}: ${a.status} retry-after=${a.retryAfter ?? '-'} x-should-retry=${a.shouldRetry ?? '-'} ${a.body.slice(0, 300)}`,
        );
      totals.inEngine += inEngine;
      totals.queued += queued;
      totals.answered += ok.length;
      totals.failed += failed.length;
      // Those in the engine at the kill are lost with it (502); every other one must be answered.
      totals.queuedFailed += Math.max(0, failed.length - inEngine);
      expect(inEngine).toBe(4);
      expect(
        failed.every((a) => a.status === 502),
        failures.join('\n'),
      ).toBe(true);
    }
    chaosReport(
      'engine-restart-queue',
      {
        rounds,
        sent: totals.sent,
        inEngineAtKill: totals.inEngine,
        queued: totals.queued,
        answered: totals.answered,
        failed: totals.failed,
        timeToReadyMs: readyMs.map((ms) => Math.round(ms)).join(' '),
      },
      { queuedFailed: totals.queuedFailed },
    );
    expect(failures.filter((f) => !f.includes(' 502 ')).slice(0, 5)).toEqual([]);
    expect(totals.queuedFailed).toBe(0);
    expect(totals.answered).toBe(totals.queued);
  });
});
