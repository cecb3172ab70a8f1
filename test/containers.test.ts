import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  ContainerSupervisor,
  type ContainerSupervisorOptions,
} from '../src/agent/shards/container/container-supervisor.js';
import { gpuRequestFor, probeDaemon } from '../src/agent/container-daemon.js';
import { describeEndpoint, type DaemonClient } from '../src/agent/shards/container/daemon.js';
import {
  createContainer,
  inspectContainer,
  killContainer,
  listNodeContainers,
  removeContainer,
  startContainer,
} from '../src/agent/shards/container/operations.js';
import { imagePresent } from '../src/agent/shards/container/pull.js';
import { containerSpec } from '../src/agent/shards/container/requests.js';
import type { ContainerRun } from '../src/agent/shards/container/types.js';
import type { ShardRun, ShardStatus } from '../src/agent/shards/types.js';
import {
  buildDerivedImage,
  buildEngineImage,
  fakeEngineRun,
  imageLlamaServer,
  imageNode,
  pushImage,
  removeImage,
  tagImage,
  testDaemon,
} from './support/engine-image.js';
import { startPodmanService } from './support/podman-service.js';
import { startRegistry } from './support/registry.js';
import { freePort } from './fakes/engines/fake-engines.js';
import { until } from './support/timing.js';

/**
 * The container supervisor against this machine's real daemons: Docker (Debian's docker.io)
 * and Podman (its own API service, started here), with the fake llama-server in an image
 * built on each (no registry). Every container carries its suite's own node id, so afterAll
 * removes what is left whatever failed.
 */

const docker = await testDaemon();
if ('skip' in docker) console.log(`containers.test.ts: Docker skipped: ${docker.skip}`);
// A registry of this file's own, for real pulls (Podman is told it speaks plain HTTP).
const registry = await startRegistry();
if ('skip' in registry) console.log(`containers.test.ts: registry pulls skipped: ${registry.skip}`);
afterAll(async () => {
  if ('close' in registry) await registry.close();
});
const podman = await startPodmanService({ insecureRegistries: 'host' in registry ? [registry.host] : [] });
if ('skip' in podman) console.log(`containers.test.ts: Podman skipped: ${podman.skip}`);
afterAll(async () => {
  if ('close' in podman) await podman.close();
});

const dir = mkdtempSync(join(tmpdir(), 'llmgw-containers-'));
const model = join(dir, 'model.gguf');
writeFileSync(model, 'GGUF');
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const daemons: { name: string; daemon: { client: DaemonClient } | { skip: string } }[] = [
  { name: 'Docker', daemon: docker },
  { name: 'Podman', daemon: podman },
];

for (const { name, daemon } of daemons)
  describe.skipIf('skip' in daemon)(`the container supervisor on a real ${name} daemon`, () => {
    const client = 'client' in daemon ? daemon.client : (undefined as unknown as DaemonClient);
    const node = `test-${randomBytes(4).toString('hex')}`;
    let image = '';
    function engineRun(key: string, port: number, container: Partial<ContainerRun> = {}): ShardRun {
      return fakeEngineRun({ key, port, image, dir, model, env: { FAKE_LLAMA_LOAD_MS: '300' }, container });
    }

    /** A supervisor whose statuses are kept by key, with this file's node id and quick timings. */
    function supervisor(options: Partial<ContainerSupervisorOptions> = {}): {
      sup: ContainerSupervisor;
      status: Map<string, ShardStatus>;
      /** Every status reported, oldest first. */
      history: ShardStatus[];
      removed: string[];
    } {
      const status = new Map<string, ShardStatus>();
      const history: ShardStatus[] = [];
      const removed: string[] = [];
      const sup = new ContainerSupervisor({
        client,
        node,
        onStatus: (s) => {
          status.set(s.key, s);
          history.push(s);
        },
        onRemoved: (k) => removed.push(k),
        backoff: { initialMs: 100, maxMs: 1000 },
        healthIntervalMs: 100,
        readyHealthIntervalMs: 500,
        ...options,
      });
      return { sup, status, history, removed };
    }

    async function ours(): Promise<{ id: string; labels: Record<string, string>; running: boolean }[]> {
      return listNodeContainers(client, node);
    }

    beforeAll(async () => {
      image = await buildEngineImage(client);
    }, 120_000);

    afterAll(async () => {
      for (const c of await ours()) await removeContainer(client, c.id);
    });

    it('runs a shard: ready over its published port, logs read, killed and restarted, adopted by the next agent, removed at scale 0', async () => {
      const port = await freePort();
      const run = engineRun('tiny-1/0', port);
      const first = supervisor();
      first.sup.apply([run]);
      const ready = await until('ready', () => first.status.get('tiny-1/0')?.state === 'ready');
      expect(ready).toBe(true);
      const [c1] = await ours();
      expect(c1?.running).toBe(true);
      expect(c1?.labels).toMatchObject({
        'llmgw.shard': 'tiny-1/0',
        'llmgw.replica': 'tiny-1',
        'llmgw.node': node,
      });
      expect(first.status.get('tiny-1/0')?.pid).toBe((await inspectContainer(client, c1?.id ?? ''))?.pid);
      // The daemon took every field as meant (a misspelt one is silently ignored by Docker).
      const inspected = await client.json<{
        Config: { Entrypoint: string | string[]; Cmd: string[]; Env: string[] };
        HostConfig: Record<string, unknown>;
        Mounts?: unknown[];
      }>({ method: 'GET', path: `/containers/${c1?.id ?? ''}/json` });
      // Podman's own inspect gives the entrypoint as one string.
      expect([inspected.Config.Entrypoint].flat()).toEqual([imageNode]);
      expect(inspected.Config.Cmd[0]).toBe(imageLlamaServer);
      expect(inspected.Config.Env).toContain('FAKE_LLAMA_LOAD_MS=300');
      expect(inspected.HostConfig).toMatchObject({
        NetworkMode: 'bridge',
        RestartPolicy: { Name: 'no' },
        ShmSize: 64 * 2 ** 20,
        PortBindings: { [`${port}/tcp`]: [{ HostIp: '127.0.0.1', HostPort: String(port) }] },
      });
      if (client.kind === 'docker')
        expect(inspected.HostConfig['Mounts']).toEqual([
          expect.objectContaining({ Type: 'bind', Source: dir, Target: dir, ReadOnly: true }),
        ]);
      else
        expect(inspected.Mounts).toEqual([
          expect.objectContaining({ Type: 'bind', Source: dir, Destination: dir, RW: false }),
        ]);
      // A line the fake prints, through the demuxed log stream.
      await until('the log line', () =>
        first.sup.logs('tiny-1/0').some((l) => l.includes(`listening on http://0.0.0.0:${port}`)),
      );

      // Killed outside the agent: the supervisor starts a new container, with its own backoff.
      await killContainer(client, c1?.id ?? '');
      await until('restarted and ready', () => {
        const s = first.status.get('tiny-1/0');
        return s?.state === 'ready' && s.restarts === 1 ? s : undefined;
      });
      const after = first.status.get('tiny-1/0');
      expect(after?.last_exit).toMatchObject({ code: 137, signal: 'SIGKILL' });
      // While it waited to start again, it said when: the backoff after the exit.
      const failed = first.history.find((s) => s.key === 'tiny-1/0' && s.state === 'failed');
      expect(failed?.reason).toMatch(/; restarting in 100 ms$/);
      expect(
        Date.parse(failed?.restart_at ?? '') - Date.parse(after?.last_exit?.at ?? ''),
      ).toBeGreaterThanOrEqual(100);
      expect(after?.restart_at).toBeUndefined();
      expect(after?.last_exit?.log_tail.some((l) => l.includes('model loaded'))).toBe(true);
      const [c2] = await ours();
      expect(c2?.id).not.toBe(c1?.id);
      expect((await ours()).length).toBe(1);

      // The agent exits for an upgrade: the container keeps running, and the next agent adopts it.
      await first.sup.detach();
      const second = supervisor();
      second.sup.apply([run]);
      await until('adopted and ready', () => second.status.get('tiny-1/0')?.state === 'ready');
      expect(second.status.get('tiny-1/0')?.restarts).toBe(0);
      expect((await ours()).map((c) => c.id)).toEqual([c2?.id]);
      await until('its recent lines', () =>
        second.sup.logs('tiny-1/0').some((l) => l.includes('model loaded')),
      );

      // Scale 0: stopped and removed.
      second.sup.apply([]);
      await second.sup.stopped();
      expect(second.removed).toEqual(['tiny-1/0']);
      expect(second.sup.statuses()).toEqual([]);
      expect(await ours()).toEqual([]);
      await second.sup.stopAll();
    });

    it('replaces an earlier container that runs something else, and removes an unknown one after the grace', async () => {
      const [p1, p2] = [await freePort(), await freePort()];
      // What an earlier agent left: the same key with an older image setting, and a shard no longer placed here.
      const old = engineRun('tiny-2/0', p1, { ipc: { shmBytes: 32 * 2 ** 20 } });
      const ghost = engineRun('ghost-1/0', p2);
      const ids: string[] = [];
      for (const r of [old, ghost]) {
        const id = await createContainer(client, containerSpec(r, { node, attempt: 'x' }));
        await startContainer(client, id);
        ids.push(id);
      }
      const before = Date.now();
      const { sup, status } = supervisor({ orphanGraceMs: 2000, sweepIntervalMs: 200 });
      sup.apply([engineRun('tiny-2/0', p1)]);
      await until('the replacement ready', () => status.get('tiny-2/0')?.state === 'ready');
      expect((await ours()).map((c) => c.id)).not.toContain(ids[0]);
      const removedAt = await until(
        'the unknown container removed',
        async () => !(await ours()).some((c) => c.id === ids[1]) && Date.now(),
        10_000,
      );
      // Not before its grace: the control plane's first assignment may still place it here.
      expect(removedAt - before).toBeGreaterThanOrEqual(2000);
      await sup.stopAll();
      expect(await ours()).toEqual([]);
    });

    it(`takes ${name === 'Docker' ? 'the NVIDIA runtime for gpus: auto on a Docker without CDI' : 'CDI for gpus: auto on Podman'}`, async () => {
      expect(
        gpuRequestFor(
          'auto',
          await probeDaemon({ runtime: client.kind, host: describeEndpoint(client.endpoint) }, {}),
        ),
      ).toBe(client.kind === 'docker' ? 'nvidia' : 'cdi');
    });

    it('reports a GPU request the daemon cannot meet in words, and does not retry it in a tight loop', async () => {
      const { sup, status } = supervisor();
      const gpu = 'GPU-5c1a4a06-1c1e-4bd4-9a3b-1a2b3c4d5e6f';
      // What `gpus: auto` takes on each: the NVIDIA runtime on this Docker, CDI on Podman.
      sup.apply([
        engineRun('gpu-1/0', await freePort(), {
          gpus: [gpu],
          gpuRequest: client.kind === 'docker' ? 'nvidia' : 'cdi',
        }),
      ]);
      const s = await until('failed', () => {
        const v = status.get('gpu-1/0');
        return v?.state === 'failed' ? v : undefined;
      });
      if (client.kind === 'docker') {
        expect(s.reason).toContain(`could not select device driver "nvidia" with capabilities: [[gpu]]`);
        expect(s.reason).toContain(
          'install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker`, then restart dockerd',
        );
      } else {
        expect(s.reason).toMatch(
          /^the Podman daemon finds no CDI spec for this node's GPUs \(it says: .*nvidia\.com\/gpu=GPU-5c1a4a06/,
        );
        expect(s.reason).toContain(
          'generate it with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (again after a driver update or a MIG change)',
        );
      }
      expect(s.reason).toMatch(/trying again in 5 min$/);
      // Tried again, but it waits for someone to act: no restart is coming by itself.
      expect(s.restart_at).toBeUndefined();
      expect(s.restarts).toBe(0);
      expect(await ours()).toEqual([]);
      await sup.stopAll();
    });

    it('refuses an image that is not on this offline node, with its name and how to load it', async () => {
      const { sup, status } = supervisor();
      const missing = 'llmgw-test-missing/engine:0';
      sup.apply([
        engineRun('nopull-1/0', await freePort(), { image: missing, pull: 'never' }),
        engineRun('pull-1/0', await freePort(), { image: missing, pull: 'missing' }),
      ]);
      const never = await until('never refused', () => {
        const v = status.get('nopull-1/0');
        return v?.state === 'failed' ? v : undefined;
      });
      expect(never.reason).toBe(
        `image ${missing} is not on this node and agent.containers.pull is never; load it on this node with \`${client.kind} load -i FILE.tar\` (made where the registry is reachable with \`${client.kind} save -o FILE.tar ${missing}\`), or point agent.containers.images or agent.containers.registry at a registry this node reaches; trying again in 5 min`,
      );
      const pulled = await until(
        'pull refused',
        () => {
          const v = status.get('pull-1/0');
          return v?.state === 'failed' ? v : undefined;
        },
        30_000,
      );
      expect(pulled.reason).toMatch(
        new RegExp(
          `^image ${missing} is not on this node and pulling it failed: .+; load it on this node with \`${client.kind} load -i FILE.tar\``,
        ),
      );
      await sup.stopAll();
    });
    it.skipIf('skip' in registry)(
      'pulls a missing image from a registry, showing the download, then runs it',
      async () => {
        const host = 'host' in registry ? registry.host : '';
        const suffix = randomBytes(4).toString('hex');
        const local = `llmgw-test-pulled:${suffix}`;
        const ref = `${host}/llmgw/engine-pulled:${suffix}`;
        // A layer of 16 MiB that is on no node yet (the base's layers are: those are not fetched again).
        await buildDerivedImage(client, image, local, [{ path: 'blob', content: randomBytes(16 * 2 ** 20) }]);
        await tagImage(client, local, ref);
        await pushImage(client, ref);
        await removeImage(client, ref);
        await removeImage(client, local);
        expect(await imagePresent(client, ref)).toBe(false);

        const { sup, status, history } = supervisor();
        try {
          sup.apply([engineRun('pulled-1/0', await freePort(), { image: ref, pull: 'missing' })]);
          await until('pulled and ready', () => status.get('pulled-1/0')?.state === 'ready', 60_000);
          const downloading = history.filter((s) => s.state === 'downloading');
          expect(downloading[0]).toMatchObject({ reason: `pulling image ${ref}` });
          if (client.kind === 'docker') {
            // Docker counts bytes per layer: the new one's 16 MiB (compressed, random: about as much).
            const last = downloading.at(-1)?.download;
            expect(last?.total).toBeGreaterThanOrEqual(16 * 2 ** 20);
            expect(downloading.some((s) => (s.download?.done ?? 0) > 0)).toBe(true);
            expect(downloading.every((s) => (s.download?.done ?? 0) <= (s.download?.total ?? 0))).toBe(true);
          }
          expect(await imagePresent(client, ref)).toBe(true);
        } finally {
          sup.apply([]);
          await sup.stopped();
          await sup.stopAll();
          await removeImage(client, ref).catch(() => undefined);
        }
      },
    );
  });
