import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ControlPlaneView } from '../../src/protocol/node-views.js';
import type { ReplicaView } from '../../src/protocol/replica-views.js';
import { fakeLlamaServer } from '../fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from '../support/agents.js';
import { api } from '../support/control-plane.js';
import { enginePorts, until } from '../support/fleet.js';
import { createTempDatabase, type TempDatabase } from '../support/postgres.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { localModel } from '../support/local-model.js';

import { chaosReport, scaled } from './chaos.js';

// Issue 14 item 5: kill the leader under gateway load. Two `llmgw server` processes on one
// PostgreSQL database; the agent talks to the follower, whose gateway takes the load. The
// leader is killed with SIGKILL: the follower's gateway keeps serving, it takes the lead within
// the lease (ha.lease_s), and no engine restarts. Then it places a change as the new leader.

const leaseS = 3;

describe('the leader killed under gateway load', () => {
  let db: TempDatabase;
  let dir: string;
  let leader: ServerProcess;
  let follower: ServerProcess;
  let agent: TestAgent;
  let key = '';

  const controlPlanes = async (s: ServerProcess) =>
    (await api(s.url, s.adminKey, 'GET', '/status')).body.control_planes as ControlPlaneView[];
  const replicas = async (s: ServerProcess) =>
    (await api(s.url, s.adminKey, 'GET', '/replicas?model=m')).body.items as ReplicaView[];

  beforeAll(async () => {
    db = await createTempDatabase();
    undo.push(() => db.drop());
    dir = mkdtempSync(join(tmpdir(), 'llmgw-leader-kill-'));
    undo.push(() => rm(dir, { recursive: true, force: true }));
    localModel(dir);
    const bin = join(dir, 'llama-server');
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`);
    chmodSync(bin, 0o755);
    const ports = await enginePorts();
    const config = [
      `placement: {ports: ${ports.first}-${ports.last}}`,
      `ha: {lease_s: ${leaseS}}`,
      'agent:',
      '  heartbeat_ms: 500',
      '  stop_grace_s: 2',
      '  engines:',
      '    llamacpp:',
      `      bin: ${bin}`,
    ].join('\n');
    const env = { LLMGW_ENGINE_KEY_SECRET: 'leader-kill-engine-key-secret-0123456789abcdef' };
    leader = await startServerProcess({ config, database: db.url, env });
    undo.push(() => leader.cleanup());
    // The first one up leads; the second follows.
    await until('the first control plane to lead', async () =>
      (await controlPlanes(leader)).find((c) => c.self && c.leader),
    );
    follower = await startServerProcess({ config, database: db.url, env });
    undo.push(() => follower.cleanup());
    agent = await startTestAgent(follower, 'node-1');
    undo.push(() => agent.stop());
    key = (await api(follower.url, follower.adminKey, 'POST', '/keys', { name: 'load', role: 'user' })).body
      .secret as string;
    const added = await api(follower.url, follower.adminKey, 'POST', '/models', {
      name: 'm',
      source: join(dir, 'm.safetensors'),
      replicas: 1,
      context_length: 2048,
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    await until('a ready replica of m', async () =>
      (await replicas(follower)).find((r) => r.state === 'ready'),
    );
  });
  /** What beforeAll started, undone in reverse order whatever failed. */
  const undo: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const u of undo.reverse()) await u().catch(() => undefined);
  });

  it("keeps the follower's gateway serving, hands over the lead within the lease, and restarts no engine", async () => {
    const before = (await replicas(follower))[0];
    const pid = before?.shards[0]?.pid;
    expect(pid).toBeGreaterThan(0);
    // The gateway's route table follows within its refresh: served once before the load counts.
    await until('the gateway to serve m', async () => {
      const res = await fetch(`${follower.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'warm' }], max_tokens: 4 }),
      });
      await res.text();
      return res.status === 200 ? true : undefined;
    });
    let sent = 0;
    let ok = 0;
    const failures: string[] = [];
    let running = true;
    const worker = async () => {
      while (running) {
        const n = sent++;
        try {
          const res = await fetch(`${follower.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({
              model: 'm',
              messages: [{ role: 'user', content: `load ${n}` }],
              max_tokens: 4,
            }),
          });
          const text = await res.text();
          if (res.status === 200) ok++;
          else failures.push(`#${n}: ${res.status} ${text.slice(0, 300)}`);
        } catch (e) {
          failures.push(`#${n}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, worker));
    let takeoverS = 0;
    try {
      await until('requests served before the kill', () => (ok >= 20 ? true : undefined));
      const killedAt = Date.now();
      await leader.kill();
      await until(
        'the follower to lead',
        async () => (await controlPlanes(follower)).find((c) => c.self && c.leader),
        20_000,
      );
      takeoverS = (Date.now() - killedAt) / 1000;
      // Load goes on for a while under the new leader.
      const at = ok;
      await until(
        'requests served after the takeover',
        () => (ok >= at + scaled(20, 200) ? true : undefined),
        60_000,
      );
    } finally {
      running = false;
      await load;
    }
    const after = (await replicas(follower))[0];
    const restarts = (after?.restarts ?? 0) - (before?.restarts ?? 0);
    // The new leader places: a second replica beside the first.
    const grown = await api(follower.url, follower.adminKey, 'PATCH', '/models/m', { replicas: 2 });
    expect(grown.status, JSON.stringify(grown.body)).toBe(200);
    await until('two ready replicas of m', async () => {
      const list = (await replicas(follower)).filter((r) => r.state === 'ready');
      return list.length === 2 ? list : undefined;
    });
    const line = chaosReport(
      'leader-kill',
      { requests: sent, served: ok, takeover_s: takeoverS.toFixed(1), lease_s: leaseS },
      {
        failed_requests: failures.length,
        engine_restarts: restarts + (after?.shards[0]?.pid === pid ? 0 : 1),
      },
    );
    expect(failures.slice(0, 5).join('\n'), line).toBe('');
    expect(after?.shards[0]?.pid).toBe(pid);
    expect(restarts).toBe(0);
    // Within a lease and the beat a follower tries on (a third of it), with room for a loaded machine.
    expect(takeoverS).toBeLessThan(leaseS * (4 / 3) + 3);
  });
});
