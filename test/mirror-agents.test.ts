import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Origin } from '../src/models/origin.js';

import { llama31_8b, tinyTensors } from './fakes/gguf/models.js';
import { writeGguf } from './fakes/gguf/writer.js';
import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { until } from './support/fleet.js';

// Item 6 of issue 11: agents fetch each file through the control plane's mirror, which asks the
// hub once per file however many agents want it.

const weights = writeGguf({ metadata: llama31_8b, tensors: tinyTensors(6 * 1024 * 1024) });
const projector = writeGguf({ metadata: [['general.architecture', { t: 'str', v: 'clip' }]] });
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('two agents behind the mirror', () => {
  let t: TestControlPlane;
  const agents: TestAgent[] = [];

  beforeAll(async () => {
    t = await startControlPlane({
      repos: {
        'org/mirrored-GGUF': {
          files: { 'mirrored-Q4_K_M.gguf': weights, 'mmproj-mirrored-f16.gguf': projector },
        },
      },
      config: [
        'agent:',
        '  heartbeat_ms: 200',
        'models:',
        '  - name: mirrored',
        '    source: hf://org/mirrored-GGUF/mirrored-Q4_K_M.gguf',
        '    replicas: 0',
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
      ].join('\n'),
    });
    await t.cp.origins.idle();
    agents.push(await startTestAgent(t, 'node-a'), await startTestAgent(t, 'node-b'));
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
  });

  it('fetches each file from the hub once, and both nodes get verified copies in the cache layout', async () => {
    const view = await api(t.url, t.adminKey, 'GET', '/models/mirrored');
    const origin = (view.body as { status: { origin: Origin } }).status.origin;
    expect(origin.files.map((f) => f.path)).toEqual(['mirrored-Q4_K_M.gguf', 'mmproj-mirrored-f16.gguf']);
    const seen = t.hub.requests.length;

    const pull = await api(t.url, t.adminKey, 'POST', '/models/mirrored/pull', {});
    expect(pull.status).toBe(202);
    await until('both nodes have the files', async () => {
      const d = await api(t.url, t.adminKey, 'GET', '/models/mirrored/downloads');
      const nodes = (d.body as { nodes: { node: string; state: string; error?: string }[] }).nodes;
      const failed = nodes.find((n) => n.state === 'failed');
      if (failed !== undefined) throw new Error(`node ${failed.node} failed: ${failed.error ?? ''}`);
      return nodes.length === 2 && nodes.every((n) => n.state === 'done') ? nodes : undefined;
    });

    for (const a of agents) {
      const snapshot = join(a.dataDir, 'models', 'hub', 'models--org--mirrored-GGUF', 'snapshots');
      expect(sha(readFileSync(join(snapshot, origin.commit ?? '', 'mirrored-Q4_K_M.gguf')))).toBe(
        sha(weights),
      );
      expect(sha(readFileSync(join(snapshot, origin.commit ?? '', 'mmproj-mirrored-f16.gguf')))).toBe(
        sha(projector),
      );
    }
    // What reached the hub after the pull: one fetch of each file, none by the agents themselves.
    const after = t.hub.requests.slice(seen).filter((r) => r.method === 'GET');
    const bodies = after.filter((r) => r.server === 'files');
    expect(bodies.map((r) => r.url.split('/').pop()).sort()).toEqual(
      origin.files.map((f) => f.sha256).sort(),
    );
    const resolves = after.filter((r) => r.url.includes('/resolve/'));
    expect(resolves).toHaveLength(origin.files.length);

    // The mirror keeps them, in the same layout, and `ctl cache` shows it.
    const cache = await api(t.url, t.adminKey, 'GET', '/cache');
    expect(JSON.stringify(cache.body)).toContain('hf://org/mirrored-GGUF');
  });
});
