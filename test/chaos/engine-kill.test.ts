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

// Issue 14 item 5: kill an engine under load. Two CPU replicas of one model on test agents,
// steady non-streamed load through the gateway of the control plane's process; one engine is
// killed with SIGKILL by its pid (as the agent reports it). No request fails: those in flight
// on it, and those sent to it before the gateway learns it is gone, are retried on the other
// replica before their first byte. Its agent's supervisor starts it again, and it serves again.

describe('an engine killed under load', () => {
  let dir: string;
  let t: TestControlPlane;
  let gateway: Gateway;
  let key: string;
  const agents: TestAgent[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-engine-kill-'));
    const source = localModel(dir);
    const ports = await enginePorts();
    t = await startControlPlane({
      config: [
        `placement: {ports: ${ports.first}-${ports.last}}`,
        'agent:',
        '  heartbeat_ms: 200',
        '  stop_grace_s: 2',
        '  engines:',
        `    llamacpp: {bin: ${fakeLlamaServer}}`,
      ].join('\n'),
    });
    agents.push(await startTestAgent(t, 'node-a'), await startTestAgent(t, 'node-b'));
    gateway = await startLocalGateway(t.cp, {
      logger: pino({ level: 'silent' }),
      settings: t.cp.settings.current.settings,
    });
    key = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'load', role: 'user' })).body.secret;
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'm',
      source,
      replicas: 2,
      context_length: 2048,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    await until(
      'two ready replicas of m in the gateway',
      () => {
        const ready = t.cp.fleet.replicas('m').filter((r) => r.state === 'ready');
        return ready.length === 2 && gateway.router.replicaCount('m') === 2 ? true : undefined;
      },
      60_000,
    );
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails no non-streamed request, and the killed replica is ready again', async () => {
    let sent = 0;
    let ok = 0;
    const failures: string[] = [];
    const servedBy = new Map<string, number>();
    let running = true;
    const worker = async () => {
      while (running) {
        const n = sent++;
        try {
          const res = await fetch(`${t.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            // A conversation each: spread over both replicas, none held by affinity.
            body: JSON.stringify({
              model: 'm',
              messages: [{ role: 'user', content: `load ${n}` }],
              max_tokens: 4,
            }),
          });
          const text = await res.text();
          if (res.status === 200 && (JSON.parse(text) as { choices?: unknown[] }).choices?.length === 1) {
            ok++;
            const by = res.headers.get('x-llmgw-replica') ?? '?';
            servedBy.set(by, (servedBy.get(by) ?? 0) + 1);
          } else failures.push(`#${n}: ${res.status} ${text.slice(0, 300)}`);
        } catch (e) {
          failures.push(`#${n}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, worker));
    try {
      await until('both replicas serving the load', () => (servedBy.size === 2 ? true : undefined));
      const kills = scaled(1, 3);
      let killedId = '';
      let inFlightAtKills = 0;
      for (let k = 0; k < kills; k++) {
        // A replica with requests on it now: they are cut by the kill, and must be retried.
        const victim = await until('a ready replica with requests in flight', () =>
          t.cp.fleet
            .replicas('m')
            .find(
              (r) =>
                r.state === 'ready' &&
                r.shards[0]?.pid !== undefined &&
                (gateway.router.loads().find((l) => l.id === r.id)?.inFlight ?? 0) > 0,
            ),
        );
        const pid = victim.shards[0]?.pid;
        if (victim.id === null || pid === undefined) throw new Error('no ready replica with a pid to kill');
        killedId = victim.id;
        inFlightAtKills += gateway.router.loads().find((l) => l.id === victim.id)?.inFlight ?? 0;
        const restartsBefore = victim.restarts;
        const servedBefore = servedBy.get(killedId) ?? 0;
        process.kill(pid, 'SIGKILL');
        // Its supervisor starts it again, with a new process; the gateway sends it requests again.
        await until(
          `replica ${killedId} ready again after its engine (pid ${pid}) was killed`,
          () => {
            const r = t.cp.fleet.replicas('m').find((x) => x.id === killedId);
            const again = r?.state === 'ready' && r.restarts > restartsBefore && r.shards[0]?.pid !== pid;
            return again && (servedBy.get(killedId) ?? 0) > servedBefore ? true : undefined;
          },
          60_000,
        );
      }
      running = false;
      await load;
      chaosReport(
        'engine-kill',
        {
          requests: sent,
          answered: ok,
          kills,
          inFlightAtKills,
          servedBy: [...servedBy].map(([id, n]) => `${id}:${n}`).join(' '),
        },
        { failed: failures.length },
      );
      expect(failures.slice(0, 10)).toEqual([]);
      expect(ok).toBe(sent);
      expect(killedId).not.toBe('');
      expect(inFlightAtKills).toBeGreaterThan(0);
    } finally {
      running = false;
      await load;
    }
  });
});
