import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { isRunning } from '../../src/agent/shards/process/process-tree.js';
import type { ReplicaView } from '../../src/protocol/replica-views.js';
import { fakeLlamaServer } from '../fakes/engines/fake-engines.js';
import { startTestAgent, type TestAgent } from '../support/agents.js';
import { api, startControlPlane, type TestControlPlane } from '../support/control-plane.js';
import { enginePorts, until } from '../support/fleet.js';
import { localModel } from '../support/local-model.js';
import { chaosReport, scaled } from './chaos.js';

/**
 * An agent cut from its control plane for longer than placement.node_lost_after_s: its replica
 * is placed on the other node, and when the agent returns it stops the engine it kept running
 * while alone, rather than leaving it beside the new one. The cut is a TCP proxy between that
 * agent and the control plane that closes its connections and refuses new ones.
 */

const lostAfterS = 5;
/** How long past node_lost_after_s the agent stays cut. */
const cutBeyondMs = scaled(1500, 10_000);
/** How long after the agent returns its old engine may still run. */
const stopBoundMs = 10_000;

/** A TCP proxy to `target` that can be cut (its connections closed, new ones refused) and restored. */
async function cuttableProxy(target: URL): Promise<{
  url: string;
  cut: () => void;
  restore: () => void;
  refused: () => number;
  close: () => Promise<void>;
}> {
  const open = new Set<Socket>();
  let cut = false;
  let refused = 0;
  const server: Server = createServer((client) => {
    if (cut) {
      refused++;
      client.destroy();
      return;
    }
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    cut: () => {
      cut = true;
      for (const s of open) s.destroy();
    },
    restore: () => {
      cut = false;
    },
    refused: () => refused,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.each([
  { restarted: false, scenario: 'agent-partition' },
  // Restarted while cut (a crash, an upgrade): it adopts the engine from its last saved
  // assignment before it reaches the control plane, and must still stop it when it does.
  { restarted: true, scenario: 'agent-partition-restarted' },
])(
  'chaos: an agent cut from the control plane for longer than the grace period ($scenario)',
  ({ restarted, scenario }) => {
    let t: TestControlPlane;
    let proxy: Awaited<ReturnType<typeof cuttableProxy>>;
    const agents: TestAgent[] = [];
    /** Data dirs of agents detached here, removed at the end (a stopped test agent removes its own). */
    const detachedDirs: string[] = [];
    let dir = '';
    let source = '';
    /** The engine started behind the proxy: killed at the end should the agent have left it. */
    let oldPid: number | undefined;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'llmgw-chaos-partition-'));
      source = localModel(dir);
      const wrapper = join(dir, 'llama-server');
      writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`);
      chmodSync(wrapper, 0o755);
      const ports = await enginePorts();
      t = await startControlPlane({
        config: [
          `placement: {ports: ${ports.first}-${ports.last}, node_lost_after_s: ${lostAfterS}}`,
          'agent:',
          '  heartbeat_ms: 200',
          '  stop_grace_s: 2',
          '  engines:',
          '    llamacpp:',
          // A wrapper script that execs the engine, as operators write to set its environment: a
          // restarted agent still knows the engine by the command line recorded once it ran.
          `      bin: ${wrapper}`,
        ].join('\n'),
      });
      proxy = await cuttableProxy(new URL(t.url));
    });
    afterAll(async () => {
      for (const a of agents) await a.stop();
      if (oldPid !== undefined && isRunning(oldPid)) process.kill(oldPid, 'SIGKILL');
      await proxy.close();
      await t.stop();
      rmSync(dir, { recursive: true, force: true });
      for (const d of detachedDirs) rmSync(d, { recursive: true, force: true });
    });

    const replicas = async () =>
      (await api(t.url, t.adminKey, 'GET', '/replicas?model=cut')).body.items as ReplicaView[];

    it('places the replica elsewhere, and the returning agent stops its old engine', async () => {
      const behind = await startTestAgent(t, 'node-behind', [], { servers: [proxy.url] });
      agents.push(behind);
      const added = await api(t.url, t.adminKey, 'POST', '/models', {
        name: 'cut',
        source,
        replicas: 1,
        context_length: 2048,
        profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
      });
      expect(added.status, JSON.stringify(added.body)).toBe(201);
      const first = await until('the replica ready behind the proxy', async () => {
        const [r] = await replicas();
        return r?.state === 'ready' && r.node === 'node-behind' ? r : undefined;
      });
      const pid = first.shards[0]?.pid ?? 0;
      oldPid = pid;
      expect(pid).toBeGreaterThan(0);
      agents.push(await startTestAgent(t, 'node-other'));

      const cutAt = Date.now();
      proxy.cut();
      const moved = await until(
        'the replica ready on node-other',
        async () => {
          const list = await replicas();
          const r = list.find((x) => x.node === 'node-other' && x.state === 'ready');
          return r !== undefined && list.every((x) => x.node !== 'node-behind') ? r : undefined;
        },
        // Generous: in the full suite the machine's two cores are shared with other test files.
        lostAfterS * 1000 + 45_000,
      );
      const movedAfterMs = Date.now() - cutAt;
      // Alone, the agent leaves its engine be: the control plane may be the one that is lost.
      expect(isRunning(pid)).toBe(true);
      const stayCut = lostAfterS * 1000 + cutBeyondMs - (Date.now() - cutAt);
      if (stayCut > 0) await new Promise((r) => setTimeout(r, stayCut));
      const runningWhileCut = isRunning(pid);
      let restarting: Promise<TestAgent> | undefined;
      if (restarted) {
        await behind.detach();
        agents.splice(agents.indexOf(behind), 1);
        detachedDirs.push(behind.dataDir);
        restarting = startTestAgent(t, 'node-behind', [], {
          servers: [proxy.url],
          dataDir: behind.dataDir,
          token: false,
        });
        // Its start (the saved assignment resumed, the engine adopted) while still cut.
        await new Promise((r) => setTimeout(r, 500));
      }
      // Restarted, it adopts the engine rather than stopping it before the control plane says so.
      const runningAtReturn = isRunning(pid);
      const cutMs = Date.now() - cutAt;

      proxy.restore();
      const backAt = Date.now();
      if (restarting !== undefined) agents.push(await restarting);
      const stoppedAfterMs = await until(
        'the old engine stopped',
        () => (isRunning(pid) ? undefined : Date.now() - backAt),
        stopBoundMs,
      ).catch(() => undefined);
      const list = await replicas();
      const enginesLeft = isRunning(pid) ? 1 : 0;
      const report = chaosReport(
        scenario,
        {
          cut_ms: cutMs,
          node_lost_after_s: lostAfterS,
          moved_after_ms: movedAfterMs,
          agent_restarted_while_cut: restarted,
          old_engine_ran_while_cut: runningWhileCut && runningAtReturn,
          old_engine_stopped_after_ms: stoppedAfterMs ?? -1,
          refused_connections: proxy.refused(),
        },
        {
          engines_left_running: enginesLeft,
          extra_replicas: Math.max(0, list.length - 1),
          replicas_not_ready: list.filter((r) => r.state !== 'ready').length,
        },
      );
      expect(report).toContain(scenario);
      expect(runningWhileCut).toBe(true);
      expect(runningAtReturn).toBe(true);
      expect(proxy.refused()).toBeGreaterThan(0);
      expect(enginesLeft).toBe(0);
      expect(list.map((r) => [r.id, r.node, r.state])).toEqual([[moved.id, 'node-other', 'ready']]);
    }, 150_000);
  },
);
