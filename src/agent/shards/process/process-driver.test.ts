import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { freePort } from '../../../../test/fakes/engines/fake-engines.js';
import { driverContract, type DriverHarness } from '../driver.contract.js';
import { readStateFile } from './leftovers.js';
import { isRunning } from './process-tree.js';
import { Supervisor } from './process-supervisor.js';

/** A Node script as the engine: it answers health on its port and says so. */
function engineScript(port: number): string {
  return `require('node:http').createServer((q, r) => r.end('ok')).listen(${port}, '127.0.0.1', () => console.log('engine up on ${port}'));`;
}

driverContract('process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-process-driver-'));
  const stateFile = join(dir, 'processes.json');
  const harness: DriverHarness = {
    logLine: 'engine up',
    run: (key, port, variant = 'v1') => {
      const [replica = key, rank = '0'] = key.split('/');
      return {
        key,
        replica,
        rank: Number(rank),
        processes: [
          {
            name: 'engine',
            bin: process.execPath,
            args: ['-e', engineScript(port)],
            env: { VARIANT: variant },
          },
        ],
        health: { url: `http://127.0.0.1:${port}/health`, loading: 'refuses-connections' },
        stopGraceMs: 2000,
      };
    },
    supervisor: (o) =>
      new Supervisor({
        ...o,
        logDir: join(dir, 'logs'),
        stateFile,
        backoff: { initialMs: 50, maxMs: 400 },
        healthIntervalMs: 40,
        readyHealthIntervalMs: 100,
      }),
    engine: (key) =>
      Promise.resolve(
        readStateFile(stateFile)
          .find((r) => r.key === key)
          ?.pid.toString(),
      ),
    running: (id) => Promise.resolve(isRunning(Number(id))),
    crash: (id) => {
      process.kill(Number(id), 'SIGKILL');
      return Promise.resolve();
    },
    sweep: (sup) => {
      sup.releaseUnclaimed();
      return Promise.resolve();
    },
    freePort,
  };
  return harness;
});
