import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { isRunning } from '../src/agent/supervisor/process-tree.js';
import { fakeGguf, fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { startTestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { enginePorts, until } from './support/fleet.js';

interface Replica {
  id: string;
  state: string;
  shards: { pid?: number }[];
}

describe('an agent restarted on its data dir', () => {
  let t: TestControlPlane;
  const replicasOf = async (model: string) =>
    (await api(t.url, t.adminKey, 'GET', `/replicas?model=${model}`)).body.items as Replica[];
  const readyReplica = (model: string) =>
    until(`${model} ready`, async () => (await replicasOf(model)).find((r) => r.state === 'ready'));
  const cpuModel = (name: string) => ({
    name,
    source: fakeGguf(),
    profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, min_memory_gb: 0.1 }],
  });

  beforeAll(async () => {
    const ports = await enginePorts();
    t = await startControlPlane({
      config: `agent:\n  heartbeat_ms: 150\n  stop_grace_s: 2\n  engines:\n    llamacpp: {bin: ${fakeLlamaServer}}\nplacement:\n  ports: ${ports.first}-${ports.last}\n`,
    });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('takes over the engines the killed one left (same pids, ready), and stops the one no longer placed here', async () => {
    expect((await api(t.url, t.adminKey, 'POST', '/models', cpuModel('kept'))).status).toBe(201);
    expect((await api(t.url, t.adminKey, 'POST', '/models', cpuModel('dropped'))).status).toBe(201);
    const first = await startTestAgent(t, 'restarted');
    const kept = await readyReplica('kept');
    const dropped = await readyReplica('dropped');
    const keptPid = kept.shards[0]?.pid ?? 0;
    const droppedPid = dropped.shards[0]?.pid ?? 0;
    // The agent dies without stopping anything, as with kill -9.
    await first.detach();
    expect(isRunning(keptPid) && isRunning(droppedPid)).toBe(true);
    // While it is away, one model is deleted.
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/dropped')).status).toBeLessThan(300);

    const second = await startTestAgent(t, 'restarted', [], { dataDir: first.dataDir, token: false });
    try {
      // Taken over from the saved assignment before the control plane answered: the same process.
      expect(second.supervisor.statuses().find((s) => s.replica === kept.id)).toMatchObject({
        state: 'ready',
        pid: keptPid,
        restarts: 0,
      });
      // The control plane's assignment does not place `dropped` here any more: stopped.
      await until('the dropped engine stopped', () => (isRunning(droppedPid) ? undefined : true));
      const again = await readyReplica('kept');
      expect(again.shards[0]?.pid).toBe(keptPid);
      expect(isRunning(keptPid)).toBe(true);
      // Its log, written before and after the restart, is there to read.
      const log = await api(t.url, t.adminKey, 'GET', `/replicas/${kept.id}/logs?tail=50`);
      expect(JSON.stringify(log.body)).toContain('model loaded');

      expect((await api(t.url, t.adminKey, 'DELETE', '/models/kept')).status).toBeLessThan(300);
      await until('the kept engine stopped once unassigned', () => (isRunning(keptPid) ? undefined : true));
    } finally {
      await second.stop();
    }
  });
});
