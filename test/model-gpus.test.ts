import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ModelGpusView } from '../src/protocol/model-gpus-views.js';
import type { Fleet } from '../src/server/fleets/fleet.js';
import { changeModelGpus } from '../src/server/services/model-gpus.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { llamaGgufFile, llamaGgufRepo, testRepos } from './support/hub.js';
import { a100 } from './support/inventory.js';

const declared = `models:
  - name: team-qwen
    source: hf://Qwen/Qwen2.5-7B-Instruct
    replicas: 0
    profiles:
      - name: l4
        engine: vllm
        gpu_class: l4-24g
`;

const l4 = (i: number) => a100(i, { class: 'l4-24g', name: 'NVIDIA L4', memory_total_mib: 23034 });
const profile = { name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' };
/** Qwen2.5-7B (28 heads, 4 KV heads, 14.2 GiB), and a second with a profile on CPUs too. */
const qwen = { name: 'qwen-7b', source: 'hf://Qwen/Qwen2.5-7B-Instruct', replicas: 0, profiles: [profile] };
/** Qwen2.5-72B: 135 GiB of weights. */
const big = { name: 'qwen-72b', source: 'hf://Qwen/Qwen2.5-72B-Instruct', replicas: 0, profiles: [profile] };
const twoProfiles = {
  name: 'two',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  replicas: 0,
  profiles: [profile, { ...profile, name: 'l4-pair', tp: 2 }],
};
/** Llama 3.1 8B as a GGUF on llama.cpp, its layers split 3:1 over two cards. */
const gguf = {
  name: 'llama-gguf',
  source: `hf://${llamaGgufRepo}/${llamaGgufFile}`,
  replicas: 0,
  profiles: [{ name: 'l4', engine: 'llamacpp', gpu_class: 'l4-24g', gpus_per_node: 2, args: ['-ts', '3,1'] }],
};
/** A source with no config.json: no shape. */
const shapeless = {
  name: 'shapeless',
  source: 'hf://org/no-config',
  replicas: 0,
  profiles: [profile],
};

/** POST /api/v1/models/{name}/gpus over real HTTP, on agents reporting L4s (2 on gpu-a, 4 on gpu-b). */
describe('POST /api/v1/models/{name}/gpus', () => {
  let t: TestControlPlane;
  let userKey: string;
  const agents: TestAgent[] = [];
  const gpus = (name: string, body: unknown, key = t.adminKey) =>
    api(t.url, key, 'POST', `/models/${name}/gpus`, body);
  const stored = async (name: string) => (await api(t.url, t.adminKey, 'GET', `/models/${name}`)).body;

  beforeAll(async () => {
    t = await startControlPlane({
      config: declared,
      repos: {
        ...testRepos(),
        'org/no-config': { files: { 'model.safetensors': Buffer.alloc(1024, 1) } },
      },
    });
    for (const m of [qwen, big, twoProfiles, gguf, shapeless])
      expect((await api(t.url, t.adminKey, 'POST', '/models', m)).status).toBe(201);
    userKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader', role: 'user' })).body.secret;
    agents.push(await startTestAgent(t, 'gpu-a', [l4(0), l4(1)]));
    agents.push(await startTestAgent(t, 'gpu-b', [l4(0), l4(1), l4(2), l4(3)]));
    // Joined is not yet reported: wait for both nodes' cards.
    const reported = async () =>
      ((await api(t.url, t.adminKey, 'GET', '/nodes')).body.items as { devices: unknown[] }[]).filter(
        (n) => n.devices.length > 0,
      ).length;
    for (let i = 0; i < 400 && (await reported()) < 2; i++) await new Promise((r) => setTimeout(r, 25));
    expect(await reported()).toBe(2);
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
  });

  it('puts a vLLM replica on 2 cards: tensor parallel 2, the memory before and after, stored and audited', async () => {
    const r = await gpus('qwen-7b', { gpus: 2 });
    expect(r.status).toBe(200);
    const v = r.body as ModelGpusView;
    expect(v.model).toBe('qwen-7b');
    expect(v.note).toBeNull();
    expect(v.profiles).toEqual([
      {
        profile: 'l4',
        engine: 'vllm',
        class: 'l4-24g',
        before: {
          cards: 1,
          tp: 1,
          pp: 1,
          need_gib: 17.61,
          budget_gib: 20.69,
          fits: true,
          max_context: 32768,
          reason: null,
        },
        // Half the weights and the KV cache a card.
        after: {
          cards: 2,
          tp: 2,
          pp: 1,
          need_gib: 9.53,
          budget_gib: 20.69,
          fits: true,
          max_context: 32768,
          reason: null,
        },
        dropped_args: [],
      },
    ]);
    expect(v.rollout).toMatchObject({
      model: 'qwen-7b',
      change: 'gpus 1 → 2',
      mode: 'surge',
      by: 'admin',
      total: 0,
    });

    const m = await stored('qwen-7b');
    expect(m.profiles[0]).toMatchObject({ tp: 2, gpus_per_node: 2 });
    expect(m.metadata.version).toBe(2);
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=model/qwen-7b&action=model.gpus');
    expect(audit.body.items).toHaveLength(1);
    expect(audit.body.items[0]).toMatchObject({ actor: 'admin', action: 'model.gpus' });
    expect(audit.body.items[0].detail.changes).toEqual([
      { path: 'profiles[0].tp', before: 1, after: 2 },
      { path: 'profiles[0].gpus_per_node', before: 1, after: 2 },
    ]);

    // And back, in place.
    const back = await gpus('qwen-7b', { gpus: 1, in_place: true });
    expect(back.status).toBe(200);
    expect(back.body.rollout).toMatchObject({ change: 'gpus 2 → 1', mode: 'in-place' });
    expect((await stored('qwen-7b')).profiles[0]).toMatchObject({ tp: 1, gpus_per_node: 1 });
  });

  it("spreads llama.cpp's layers over 4 cards, its split for 2 dropped: the planner's remedy taken", async () => {
    const r = await gpus('llama-gguf', { gpus: 4 });
    expect(r.status).toBe(200);
    expect(r.body.note).toBeNull();
    expect(r.body.profiles[0]).toMatchObject({
      engine: 'llamacpp',
      // 3:1 over 2 cards, 4 slots of the 131072 tokens it was trained for: too much on card 1.
      before: {
        cards: 2,
        tp: 1,
        fits: false,
        reason: expect.stringMatching(/^needs [\d.]+ GiB on card 1 of 2 on l4-24g .*, or 4 cards$/),
      },
      after: { cards: 4, tp: 1, fits: true },
      dropped_args: ['-ts 3,1'],
    });
    expect(r.body.profiles[0].after.need_gib).toBeLessThan(r.body.profiles[0].before.need_gib);
    expect((await stored('llama-gguf')).profiles[0]).toMatchObject({ tp: 1, gpus_per_node: 4, args: [] });
  });

  it('says once what it could not check when the shape is not known', async () => {
    const r = await gpus('shapeless', { gpus: 2 });
    expect(r.status).toBe(200);
    expect(r.body.note).toMatch(
      /^not checked: its shape is not known \(.+\): whether 2 cards split its heads and hold its weights and context is not checked$/,
    );
    expect(r.body.profiles[0].after).toEqual({
      cards: 2,
      tp: 2,
      pp: 1,
      need_gib: null,
      budget_gib: null,
      fits: null,
      max_context: null,
      reason: null,
    });
  });

  it('with dry_run answers the check as if applied, and stores, audits and rolls nothing', async () => {
    const before = await stored('qwen-7b');
    const audited = async () =>
      (await api(t.url, t.adminKey, 'GET', '/audit?target=model/qwen-7b')).body.items.length as number;
    const entries = await audited();
    const r = await gpus('qwen-7b', { gpus: 4, dry_run: true });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ model: 'qwen-7b', note: null, dry_run: true });
    expect(r.body.rollout).toBeUndefined();
    expect(r.body.profiles[0]).toMatchObject({
      profile: 'l4',
      before: { cards: 1, tp: 1, fits: true },
      after: { cards: 4, tp: 4, fits: true },
    });
    expect(await stored('qwen-7b')).toEqual(before);
    expect(await audited()).toBe(entries);
  });

  describe('refusals change nothing', () => {
    const refusals: [string, string, unknown, number, string | RegExp][] = [
      [
        'a count no node has, naming the counts the nodes have',
        'qwen-72b',
        { gpus: 8 },
        412,
        'no node has 8 l4-24g cards: the nodes with that class have 2 or 4 (gpu-a 2, gpu-b 4); use one of those counts, or join a node with 8',
      ],
      [
        "tensor parallel that does not split the model's heads",
        'qwen-7b',
        { gpus: 3 },
        412,
        'vLLM cannot spread qwen-7b over 3 cards (tensor parallel 3): Total number of attention heads (28) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4.',
      ],
      [
        "cards that would not hold the weights, with the planner's numbers",
        'qwen-72b',
        { gpus: 4 },
        412,
        /^4 cards of l4-24g would not hold a replica of qwen-72b on vLLM \(profile "l4" of "qwen-72b"\): needs [\d.]+ GiB a card on l4-24g \(weights 3[\d.]+, KV [\d.]+ at 32768 tokens, overhead [\d.]+\), the card gives 20\.7 \(vLLM's 0\.92 of 22\.5\): /,
      ],
      [
        'a declared model, naming ctl config edit',
        'team-qwen',
        { gpus: 2 },
        409,
        /^model "team-qwen" is declared in the settings file \/.+config\.yaml: change its profile's cards there \(gpus_per_node, and tp for vLLM, SGLang and TensorRT-LLM\) with llmgw ctl config edit$/,
      ],
      [
        'several GPU profiles and none named',
        'two',
        { gpus: 2 },
        400,
        'model "two" has several GPU profiles (l4, l4-pair): say which with --profile (profile in the API)',
      ],
      [
        'an unknown profile',
        'two',
        { gpus: 2, profile: 'l4-piar' },
        404,
        'model "two" has no profile "l4-piar"; did you mean "l4-pair"? (its profiles: l4, l4-pair)',
      ],
      [
        'an unknown model',
        'qwen-7',
        { gpus: 2 },
        404,
        'model "qwen-7" does not exist; did you mean "qwen-7b"? (llmgw ctl models lists them)',
      ],
      [
        'a dry run, refused as the change would be',
        'qwen-7b',
        { gpus: 3, dry_run: true },
        412,
        'vLLM cannot spread qwen-7b over 3 cards (tensor parallel 3): Total number of attention heads (28) must be divisible by tensor parallel size (3). Tensor parallel sizes that split this model: 1, 2, 4.',
      ],
      ['no count', 'qwen-7b', { gpus: 0 }, 400, /^invalid request body:\n.*gpus/],
      ['an unknown field', 'qwen-7b', { gpus: 2, cards: 2 }, 400, /cards/],
    ];
    it.each(refusals)('%s', async (_what, name, body, status, message) => {
      const before = name === 'qwen-7' ? undefined : await stored(name);
      const r = await gpus(name, body);
      expect(r.status).toBe(status);
      if (typeof message === 'string') expect(r.body.error.message).toBe(message);
      else expect(r.body.error.message).toMatch(message);
      if (before !== undefined) expect(await stored(name)).toEqual(before);
    });

    it('a model changed between the read and the write: refused, the other change kept', async () => {
      const { cp } = t;
      const before = await stored('qwen-7b');
      const version = before.metadata.version as number;
      // Another admin changes it while the roll is being readied.
      const fleet = {
        rollModel: async (_m: string, _n: unknown, _o: unknown, write: () => Promise<void>) => {
          await cp.catalog.patch('qwen-7b', { max_output: 1000 }, 'other');
          await write();
          throw new Error('not reached');
        },
      } as unknown as Fleet;
      const deps = { catalog: cp.catalog, registry: cp.registry, settings: cp.settings, fleet };
      await expect(
        changeModelGpus(deps, 'qwen-7b', { gpus: 2, in_place: false, dry_run: false }, 'admin'),
      ).rejects.toThrow(
        `model "qwen-7b" changed since you read it (version ${version}, now ${version + 1}): read it again and reapply your change`,
      );
      const after = await stored('qwen-7b');
      expect(after.profiles).toEqual(before.profiles);
      expect(after.max_output).toBe(1000);
      await cp.catalog.patch('qwen-7b', { max_output: null }, 'other');
    });

    it('is for admins only', async () => {
      const before = await stored('qwen-7b');
      const r = await gpus('qwen-7b', { gpus: 2 }, userKey);
      expect(r.status).toBe(403);
      expect(await stored('qwen-7b')).toEqual(before);
    });
  });
});
