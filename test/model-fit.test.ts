import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { childHome, llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { until } from './support/fleet.js';
import { a100 } from './support/inventory.js';

/** Qwen2.5-7B-Instruct (28 attention heads, 4 KV heads, 14.2 GiB of bf16 weights) from the fake hub. */
const qwen = (name: string, profile: Record<string, unknown>) => ({
  name,
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 32768,
  replicas: 1,
  profiles: [{ name: 'main', engine: 'vllm', tp: 1, gpus_per_node: 1, ...profile }],
});
/** A T4 as nvidia-smi reports it: 15360 MiB, too small for Qwen2.5-7B's weights under vLLM's 0.92. */
const t4 = a100(0, { class: 't4-16g', name: 'Tesla T4', memory_total_mib: 15360 });

/**
 * The catalog and placement with the memory planner, over real HTTP: a model that fits no class
 * of the cluster is accepted with a warning and its replica waits with the planner's reason;
 * tensor parallel the heads cannot split is refused.
 */
describe('models that fit the cluster, or not', () => {
  let t: TestControlPlane;
  const agents: TestAgent[] = [];
  const post = (body: unknown) => api(t.url, t.adminKey, 'POST', '/models', body);

  beforeAll(async () => {
    t = await startControlPlane();
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
  });

  it('on an empty cluster, warns of nothing: there is no class to judge by', async () => {
    const r = await post(qwen('early', { gpu_class: 't4-16g' }));
    expect(r.status).toBe(201);
    expect(r.body).not.toHaveProperty('warnings');
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/early')).status).toBe(200);
  });

  const tooBig =
    "needs 17.6 GiB a card on t4-16g (weights 14.2, KV 1.8 at 32768 tokens, overhead 1.7), the card gives 13.8 (vLLM's 0.92 of 15.0): no context fits beside the weights: 2 cards, or a100-80g";

  it("accepts a model that fits no class of the cluster, with the planner's reason and where it would fit, and its replica waits saying so", async () => {
    agents.push(await startTestAgent(t, 'node-t4', [t4]));
    agents.push(await startTestAgent(t, 'node-a100', [a100(0)]));
    await until('both nodes report their cards', async () => {
      const nodes = (await api(t.url, t.adminKey, 'GET', '/nodes')).body.items as { devices: unknown[] }[];
      return nodes.length === 2 && nodes.every((n) => n.devices.length === 1) ? true : undefined;
    });
    const r = await post(qwen('big', { gpu_class: 't4-16g' }));
    expect(r.status).toBe(201);
    expect(r.body.warnings).toEqual([`profile "main": ${tooBig}`]);
    // Placement says the same: the T4 has a free card, but it is too small.
    const pending = await until('the replica pending with the reason', async () => {
      const items = (await api(t.url, t.adminKey, 'GET', '/replicas?model=big')).body.items as {
        state: string;
        reason?: string;
      }[];
      return items.find((x) => x.state === 'pending' && x.reason === tooBig);
    });
    expect(pending).toMatchObject({ state: 'pending', reason: tooBig });
  });

  it('says nothing when a profile fits, and warns again when a change leaves none that does', async () => {
    const fits = await post(qwen('fits', { gpu_class: 'a100-80g' }));
    expect(fits.status).toBe(201);
    expect(fits.body).not.toHaveProperty('warnings');
    const put = await api(t.url, t.adminKey, 'PUT', '/models/fits', {
      ...qwen('fits', { gpu_class: 't4-16g' }),
      replicas: 0,
    });
    expect(put.status).toBe(200);
    expect(put.body.warnings).toEqual([`profile "main": ${tooBig}`]);
    const patch = await api(t.url, t.adminKey, 'PATCH', '/models/fits', {
      profiles: [{ name: 'main', engine: 'vllm', gpu_class: 'a100-80g' }],
    });
    expect(patch.status).toBe(200);
    expect(patch.body).not.toHaveProperty('warnings');
    // A class no node has is no class that fits.
    const nowhere = await api(t.url, t.adminKey, 'PATCH', '/models/fits', {
      profiles: [{ name: 'main', engine: 'vllm', gpu_class: 'l4-24g' }],
    });
    expect(nowhere.body.warnings).toEqual([
      'profile "main": no node has l4-24g cards (classes here: a100-80g, t4-16g, cpu)',
    ]);
  });

  const headsRefusal =
    'profile "main" of model "odd" cannot run with tp 8, nothing was changed: Total number of attention heads (28) must be divisible by tensor parallel size (8). Tensor parallel sizes that split this model: 1, 2, 4.';

  it("refuses tensor parallel the model's heads cannot split, in vLLM's words, and stores nothing", async () => {
    const odd = qwen('odd', { gpu_class: 'a100-80g', tp: 8, gpus_per_node: 8 });
    const r = await post(odd);
    expect(r.body.error?.message).toBe(headsRefusal);
    expect(r.status).toBe(400);
    expect((await api(t.url, t.adminKey, 'GET', '/models/odd')).status).toBe(404);

    expect(
      (await post({ ...odd, replicas: 0, profiles: [{ ...odd.profiles[0], tp: 4, gpus_per_node: 4 }] }))
        .status,
    ).toBe(201);
    const before = (await api(t.url, t.adminKey, 'GET', '/models/odd')).body;
    const put = await api(t.url, t.adminKey, 'PUT', '/models/odd', { ...odd, replicas: 0 });
    expect(put.body.error?.message).toBe(headsRefusal);
    expect(put.status).toBe(400);
    const patch = await api(t.url, t.adminKey, 'PATCH', '/models/odd', {
      profiles: [{ name: 'main', engine: 'sglang', gpu_class: 'a100-80g', tp: 8, gpus_per_node: 8 }],
    });
    expect(patch.body.error?.message).toBe(headsRefusal);
    expect((await api(t.url, t.adminKey, 'GET', '/models/odd')).body).toEqual(before);
    // A scale of a model leaves its profiles alone, so it is not held to them.
    expect((await api(t.url, t.adminKey, 'PATCH', '/models/odd', { replicas: 0 })).status).toBe(200);
  });

  it('llmgw ctl model add and apply print the warnings on stderr, and --json has them (the built CLI)', async () => {
    const env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    const file = join(childHome, 'too-big.json');
    writeFileSync(file, JSON.stringify({ ...qwen('cli-big', { gpu_class: 't4-16g' }), replicas: 0 }));
    const added = await llmgw(['ctl', 'model', 'add', '-f', file], env);
    expect(added.code).toBe(0);
    expect(added.stdout).toBe('model "cli-big" added (0 replicas, profiles: main:vllm@t4-16g)\n');
    expect(added.stderr).toBe(`warning: profile "main": ${tooBig}\n`);
    const applied = await llmgw(['ctl', 'model', 'apply', '-f', file, '--json'], env);
    expect(applied.code).toBe(0);
    expect((JSON.parse(applied.stdout) as { warnings: string[] }).warnings).toEqual([
      `profile "main": ${tooBig}`,
    ]);
    expect(applied.stderr).toBe(`warning: profile "main": ${tooBig}\n`);
  });
});
