import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'vitest';

import { fleetContract } from '../src/server/fleets/fleet.contract.js';

import { fakeLlamaServer } from './fakes/engines/fake-engines.js';
import { startTestAgent } from './support/agents.js';
import { api, startControlPlane } from './support/control-plane.js';
import { fakeLlamaSettings } from './support/fleet.js';
import { localModel } from './support/local-model.js';

// The agent fleet: a control plane and one test agent (a CPU node of 16 threads, room for two
// CPU replicas), each replica the fake llama-server.
fleetContract('agents', {
  async start() {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-fleet-contract-'));
    const source = localModel(dir);
    const bin = join(dir, 'llama-server');
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`);
    chmodSync(bin, 0o755);
    const t = await startControlPlane({ config: await fakeLlamaSettings(bin) });
    const agent = await startTestAgent(t, 'node-a');
    return {
      fleet: t.cp.fleet,
      addModel: async (name, replicas) => {
        const r = await api(t.url, t.adminKey, 'POST', '/models', {
          name,
          source,
          replicas,
          context_length: 2048,
          profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
      },
      removeModel: async (name) => {
        const r = await api(t.url, t.adminKey, 'DELETE', `/models/${name}`);
        expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
      },
      stop: async () => {
        await agent.stop();
        await t.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  unknownReplica: 'no replica is named "nope-1" (llmgw ctl replicas lists them)',
  logLine: /model loaded/,
  pullRefused: {
    code: 'invalid_argument',
    message:
      'model m is read from /models/m.safetensors on each node, which llmgw does not fetch: put the files at that path on every node',
  },
  caches: { nodes: ['node-a'] },
});
