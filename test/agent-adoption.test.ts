import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { isRunning } from '../src/agent/shards/process/process-tree.js';
import { fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { startTestAgent } from './support/agents.js';
import { llmgw, startDaemon } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { localModel } from './support/local-model.js';
import { enginePorts, until } from './support/fleet.js';

interface Replica {
  id: string;
  state: string;
  restarts: number;
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
    source: localModel(),
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
      await api(t.url, t.adminKey, 'DELETE', '/nodes/restarted');
    }
  });

  it('llmgw agent --keep-engines leaves its engines running on SIGTERM, and the next one takes them over', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-keep-'));
    const env = {
      LLMGW_DATA_DIR: dataDir,
      LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
      LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
    };
    const token = (await api(t.url, t.adminKey, 'POST', '/node-tokens', {})).body.secret as string;
    const args = ['agent', '--server', t.url, '--name', 'upgraded-node', '--keep-engines'];
    let agent = startDaemon([...args, '--token', token], env);
    try {
      await agent.waitFor(/joined the cluster/);
      // Added once this node is in: the other test's node is gone, and must not be chosen.
      expect((await api(t.url, t.adminKey, 'POST', '/models', cpuModel('upgraded'))).status).toBe(201);
      const before = await readyReplica('upgraded');
      const pid = before.shards[0]?.pid ?? 0;
      expect(await agent.stop('SIGTERM')).toBe(0);
      expect(agent.output()).toContain(
        'the engines run on, and the next agent on this data dir takes them over',
      );
      expect(isRunning(pid)).toBe(true);
      agent = startDaemon(args, env);
      await agent.waitFor(/found an engine an earlier agent started/);
      await agent.waitFor(/connected to the control plane/);
      const after = await readyReplica('upgraded');
      expect(after.shards[0]?.pid).toBe(pid);
      expect(after.restarts).toBe(0);
      expect((await api(t.url, t.adminKey, 'DELETE', '/models/upgraded')).status).toBeLessThan(300);
      await until('its engine stopped once unassigned', () => (isRunning(pid) ? undefined : true));
    } finally {
      await agent.stop('SIGTERM');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a --server list with an address that is not a URL, naming it', async () => {
    const r = await llmgw(['agent', '--server', `${t.url},cp2:8080`, '--token', 'llmgw_join_x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('error: --server cp2:8080 is not a URL: write http://HOST:8080\n');
  });
});
