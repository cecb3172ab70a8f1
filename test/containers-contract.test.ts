import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll } from 'vitest';

import { ContainerSupervisor } from '../src/agent/shards/container/container-supervisor.js';
import type { DaemonClient } from '../src/agent/shards/container/daemon.js';
import {
  inspectContainer,
  killContainer,
  listNodeContainers,
  removeContainer,
} from '../src/agent/shards/container/operations.js';
import { containerLabels } from '../src/agent/shards/container/types.js';
import { driverContract, type DriverHarness } from '../src/agent/shards/driver.contract.js';
import { buildEngineImage, fakeEngineRun, testDaemon } from './support/engine-image.js';
import { freePort } from './fakes/engines/fake-engines.js';

/**
 * The shard lifecycle's contract through the container driver on this machine's real
 * Docker daemon (DOCKER_HOST, else /var/run/docker.sock), with the fake llama-server in an
 * image built here; skipped where no daemon answers. Every container carries this file's
 * own node id, so afterAll removes what is left whatever failed.
 */
const docker = await testDaemon();
const client: DaemonClient | undefined = 'client' in docker ? docker.client : undefined;
const image = client === undefined ? '' : await buildEngineImage(client);
const node = `contract-${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'llmgw-containers-contract-'));
const model = join(dir, 'model.gguf');
writeFileSync(model, 'GGUF');
afterAll(async () => {
  if (client !== undefined)
    for (const c of await listNodeContainers(client, node)) await removeContainer(client, c.id);
  rmSync(dir, { recursive: true, force: true });
});

function harness(c: DaemonClient): DriverHarness {
  return {
    logLine: 'listening on http://0.0.0.0:',
    run: (key, port, variant = 'v1') =>
      fakeEngineRun({ key, port, image, dir, model, env: { FAKE_LLAMA_LOAD_MS: '100', VARIANT: variant } }),
    supervisor: (o) =>
      new ContainerSupervisor({
        ...o,
        client: c,
        node,
        orphanGraceMs: 0,
        backoff: { initialMs: 100, maxMs: 1000 },
        healthIntervalMs: 100,
        readyHealthIntervalMs: 500,
      }),
    engine: async (key) =>
      (await listNodeContainers(c, node)).find((x) => x.running && x.labels[containerLabels.shard] === key)
        ?.id,
    running: async (id) => (await inspectContainer(c, id))?.running === true,
    crash: async (id) => {
      await killContainer(c, id);
    },
    sweep: async (sup) => {
      if (sup instanceof ContainerSupervisor) await sup.sweep();
    },
    freePort,
  };
}

driverContract(
  'container (Docker)',
  () => {
    if (client === undefined) throw new Error('no daemon');
    return harness(client);
  },
  'skip' in docker ? docker.skip : undefined,
);
