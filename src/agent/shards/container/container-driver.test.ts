import { randomBytes } from 'node:crypto';

import { afterAll } from 'vitest';

import { freePort } from '../../../../test/fakes/engines/fake-engines.js';
import { startFakePodman } from '../../../../test/fakes/podman-api.js';
import { driverContract, type DriverHarness } from '../driver.contract.js';
import { ContainerSupervisor } from './container-supervisor.js';
import { DaemonClient } from './daemon.js';
import { containerLabels } from './types.js';

// Against the fake of Podman's API (test/fakes/podman-api.ts): its "containers" are HTTP
// servers on their published port. test/containers.test.ts runs the container supervisor
// on the real Docker and Podman daemons where this machine has them.
const fake = await startFakePodman({ images: ['llmgw-test/engine:1'] });
afterAll(() => fake.close());

driverContract('container', () => {
  const node = `contract-${randomBytes(4).toString('hex')}`;
  const ours = (key: string) =>
    [...fake.containers.values()].find((c) => {
      const labels = (c.spec['labels'] ?? {}) as Record<string, string>;
      return (
        c.state === 'running' &&
        labels[containerLabels.node] === node &&
        labels[containerLabels.shard] === key
      );
    });
  const harness: DriverHarness = {
    logLine: 'hello from the fake podman',
    run: (key, port, variant = 'v1') => {
      const [replica = key, rank = '0'] = key.split('/');
      return {
        key,
        replica,
        rank: Number(rank),
        processes: [
          { name: 'engine', bin: '/engine', args: ['--port', String(port)], env: { VARIANT: variant } },
        ],
        container: {
          image: 'llmgw-test/engine:1',
          pull: 'never',
          gpus: [],
          gpuRequest: 'cdi',
          mounts: [],
          network: 'bridge',
          publish: { hostIp: '127.0.0.1', port },
          ipc: 'host',
          labels: {},
        },
        health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections' },
        stopGraceMs: 2000,
      };
    },
    supervisor: (o) =>
      new ContainerSupervisor({
        ...o,
        client: () => DaemonClient.connect(fake.host, 'auto'),
        node,
        orphanGraceMs: 0,
        backoff: { initialMs: 50, maxMs: 400 },
        healthIntervalMs: 40,
        readyHealthIntervalMs: 100,
      }),
    engine: (key) => Promise.resolve(ours(key)?.id),
    running: (id) => Promise.resolve(fake.containers.get(id)?.state === 'running'),
    crash: (id) => {
      fake.kill(id, 1);
      return Promise.resolve();
    },
    sweep: async (sup) => {
      if (sup instanceof ContainerSupervisor) await sup.sweep();
    },
    freePort,
  };
  return harness;
});
