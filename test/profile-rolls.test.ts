import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ReplicaView } from '../src/protocol/replica-views.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { fakeLlamaSettings, recordingLlamaServer, until } from './support/fleet.js';
import { a100 } from './support/inventory.js';
import { localModel } from './support/local-model.js';

// Issue 27 point 1 (seed 003): `ctl model gpus` and `ctl model context` roll only the named
// profile. A model with a GPU profile (llama.cpp on 4 of a node's 8 A100s) and a CPU fallback:
// a change's successors start on the GPU profile, beside their predecessors or in place, and a
// roll with no room on it is refused before anything is stored, never carried onto the CPUs.

describe('a change of a profile rolls on that profile, never onto the CPU fallback', () => {
  let t: TestControlPlane;
  let agent: TestAgent | undefined;
  let dir = '';
  let bin = '';
  const post = (path: string, body: unknown) =>
    api(t.url, t.adminKey, 'POST', `/models/llama-ts${path}`, body);
  const stored = async () =>
    (await api(t.url, t.adminKey, 'GET', '/models/llama-ts')).body as {
      context_length: number;
      profiles: { name: string; gpus_per_node: number }[];
      metadata: { version: number };
    };
  const views = (): ReplicaView[] => t.cp.fleet.replicas('llama-ts');
  /** The one replica, ready on `cards` cards of the a100 profile. */
  const readyOn = (cards: number) =>
    until(
      `llama-ts ready on ${cards} cards of its a100 profile`,
      () => {
        const list = views();
        const [r] = list;
        return list.length === 1 &&
          r?.state === 'ready' &&
          r.profile === 'a100' &&
          r.shards[0]?.devices.length === cards
          ? r
          : undefined;
      },
      40_000,
    );
  const rolled = () =>
    until(
      'the rollout of llama-ts to end',
      async () => {
        const r = (await api(t.url, t.adminKey, 'GET', '/models/llama-ts')).body.status.rollout;
        return r !== undefined && r.state !== 'rolling' ? r : undefined;
      },
      40_000,
    );
  /** Every profile a replica of the model was seen on (placed) while `work` runs, sampled every 20 ms. */
  const profilesDuring = async (work: () => Promise<unknown>): Promise<Set<string>> => {
    const seen = new Set<string>();
    const on = { value: true };
    const sampler = (async () => {
      while (on.value) {
        for (const r of views()) if (r.profile !== null) seen.add(r.profile);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      await work();
    } finally {
      on.value = false;
      await sampler;
    }
    return seen;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-profile-rolls-'));
    const engine = recordingLlamaServer(dir);
    bin = engine.bin;
    t = await startControlPlane({ config: await fakeLlamaSettings(engine.bin) });
    agent = await startTestAgent(
      t,
      'gpu-node',
      Array.from({ length: 8 }, (_, i) => a100(i)),
    );
    const model = {
      name: 'llama-ts',
      source: localModel(dir),
      context_length: 2048,
      replicas: 1,
      profiles: [
        { name: 'a100', engine: 'llamacpp', gpu_class: 'a100-80g', gpus_per_node: 4 },
        { name: 'cpu', engine: 'llamacpp', cpu: true },
      ],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', model)).status).toBe(201);
    try {
      await readyOn(4);
    } catch (e) {
      console.log(JSON.stringify(views(), null, 1));
      throw e;
    }
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says which llama-server its shard runs and why: the configured one, as nothing is installed', () => {
    const [r] = views();
    expect(r?.shards[0]?.engine_bin).toMatchObject({ source: 'configured', path: bin });
    expect(r?.shards[0]?.engine_bin?.why).toContain(bin);
  });

  it('refuses 5 cards beside the running replica, naming what is missing and --in-place; the dry run too; nothing stored', async () => {
    const before = await stored();
    const [running] = views();
    const expected = `no room beside replica ${running?.id} for a replica of the changed model llama-ts (profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (gpu-node: 4 free)): roll the change in place with --in-place, which stops each replica first, one at a time`;
    for (const body of [{ gpus: 5 }, { gpus: 5, dry_run: true }]) {
      const r = await post('/gpus', body);
      expect(r.status, JSON.stringify(body)).toBe(409);
      expect(r.body.error.message).toBe(expected);
    }
    expect(await stored()).toEqual(before);
    expect(views().map((v) => [v.id, v.profile])).toEqual([[running?.id, 'a100']]);
    // In place, it fits once the replica stopped: the dry run says so.
    const dry = await post('/gpus', { gpus: 5, in_place: true, dry_run: true });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ dry_run: true, restarted: 1 });
    expect(await stored()).toEqual(before);
  });

  it('with --in-place, the replica stops and starts again on 5 cards of its profile, never on the CPUs', async () => {
    const seen = await profilesDuring(async () => {
      const r = await post('/gpus', { gpus: 5, in_place: true });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(await rolled()).toMatchObject({ state: 'done', mode: 'in-place', replaced: 1 });
      await readyOn(5);
    });
    expect([...seen]).toEqual(['a100']);
    expect((await stored()).profiles.find((p) => p.name === 'a100')?.gpus_per_node).toBe(5);
  }, 60_000);

  it('a context change with no room beside is refused naming --in-place; in place it rolls on the profile', async () => {
    const before = await stored();
    const [running] = views();
    for (const body of [{ tokens: 4096 }, { tokens: 4096, dry_run: true }]) {
      const refused = await post('/context', body);
      expect(refused.status, JSON.stringify(body)).toBe(409);
      expect(refused.body.error.message).toBe(
        `no room beside replica ${running?.id} for a replica of the changed model llama-ts (profile a100, which the replicas it replaces ran: no ready node has 5 free a100-80g cards (gpu-node: 3 free)): roll the change in place with --in-place, which stops each replica first, one at a time`,
      );
    }
    const dry = await post('/context', { tokens: 4096, in_place: true, dry_run: true });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ dry_run: true, restarted: 1, before: 2048, after: 4096 });
    expect(dry.body).not.toHaveProperty('rollout');
    expect(await stored()).toEqual(before);

    const seen = await profilesDuring(async () => {
      const r = await post('/context', { tokens: 4096, in_place: true });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.restarted).toBe(1);
      expect(await rolled()).toMatchObject({ state: 'done', mode: 'in-place' });
      await readyOn(5);
    });
    expect([...seen]).toEqual(['a100']);
    expect((await stored()).context_length).toBe(4096);
  }, 60_000);

  it('refuses a change that has room neither beside nor in place, saying so without --in-place', async () => {
    const before = await stored();
    const [running] = views();
    // 8 cards in place: the node has 8, but a second model holds 1 of them.
    const other = {
      name: 'other',
      source: localModel(dir, 'other.safetensors'),
      replicas: 1,
      profiles: [{ name: 'a100', engine: 'llamacpp', gpu_class: 'a100-80g', gpus_per_node: 1 }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', other)).status).toBe(201);
    await until('other placed', () => t.cp.fleet.replicas('other').find((r) => r.id !== null));
    const surge = await post('/gpus', { gpus: 8 });
    expect(surge.status).toBe(409);
    expect(surge.body.error.message).toBe(
      `no room for a replica of the changed model llama-ts, beside replica ${running?.id} or in its place (profile a100, which the replicas it replaces ran: no ready node has 8 free a100-80g cards (gpu-node: 2 free)): free that room first (llmgw ctl nodes shows what runs where), or make a change that fits`,
    );
    const inPlace = await post('/gpus', { gpus: 8, in_place: true, dry_run: true });
    expect(inPlace.status).toBe(409);
    expect(inPlace.body.error.message).toBe(
      `no room for a replica of the changed model llama-ts even once replica ${running?.id} stops (profile a100, which the replicas it replaces ran: no ready node has 8 free a100-80g cards (gpu-node: 7 free)): free that room first (llmgw ctl nodes shows what runs where), or make a change that fits`,
    );
    expect(await stored()).toEqual(before);
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/other')).status).toBe(200);
  }, 60_000);

  it('3 cards beside it: the successor starts on the profile beside its predecessor, which then stops', async () => {
    await until('other gone', () => (t.cp.fleet.replicas('other').length === 0 ? true : undefined));
    const seen = await profilesDuring(async () => {
      const r = await post('/gpus', { gpus: 3 });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.rollout).toMatchObject({ mode: 'surge', total: 1 });
      expect(await rolled()).toMatchObject({ state: 'done', replaced: 1 });
      await readyOn(3);
    });
    expect([...seen]).toEqual(['a100']);
  }, 60_000);
});
