import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { PlanOption } from '../src/planner/index.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { llamaGgufFile, llamaGgufRepo, testRepos } from './support/hub.js';
import { a100 } from './support/inventory.js';

const qwen = {
  name: 'qwen-7b',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 32768,
  profiles: [
    { name: 'l4-tp1', engine: 'vllm', gpu_class: 'l4-24g', tp: 1, gpus_per_node: 1 },
    { name: 't4-tp2', engine: 'sglang', gpu_class: 't4-16g', tp: 2, gpus_per_node: 2 },
  ],
};
const llamaSource = `hf://${llamaGgufRepo}/${llamaGgufFile}`;
const optionKeys = [
  'budget_gib',
  'cards',
  'class',
  'engine',
  'fits',
  'kv_gib',
  'max_context',
  'need_gib',
  'profile',
  'reason',
  'tp',
  'weights_gib',
];

/** GET and POST /api/v1/plan over real HTTP, against the fake hub's repositories. */
describe('GET and POST /api/v1/plan', () => {
  let t: TestControlPlane;
  const agents: TestAgent[] = [];
  const get = (query: string) => api(t.url, t.adminKey, 'GET', `/plan?${query}`);
  const post = (body: unknown) => api(t.url, t.adminKey, 'POST', '/plan', body);

  beforeAll(async () => {
    t = await startControlPlane({
      repos: { ...testRepos(), 'org/no-config': { files: { 'model.safetensors': Buffer.alloc(1024, 1) } } },
    });
    expect((await api(t.url, t.adminKey, 'POST', '/models', qwen)).status).toBe(201);
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
  });

  it('on an empty cluster, refuses without classes and names --class', async () => {
    const r = await get('model=qwen-7b');
    expect(r.status).toBe(412);
    expect(r.body.error.message).toBe(
      'no node has joined, so there is no device class to plan for: name the classes (llmgw ctl plan --class l4-24g,a100-80g, or class= in the API)',
    );
  });

  it("plans a catalog model's profiles and each engine on the classes named, best first", async () => {
    const r = await get('model=qwen-7b&class=l4-24g,t4-16g');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ model: 'qwen-7b', context: 32768 });
    const options = r.body.options as PlanOption[];
    for (const o of options) expect(Object.keys(o).sort()).toEqual(optionKeys);
    const rows = options.map((o) => `${o.profile ?? 'null'} ${o.engine} ${o.class} ${o.cards}`);
    // The profiles on their classes; each engine on each class at the fewest cards, but where a
    // profile with the engine's defaults already says the same.
    expect([...rows].sort()).toEqual([
      'l4-tp1 vllm l4-24g 1',
      'null sglang l4-24g 1',
      'null trtllm l4-24g 1',
      'null trtllm t4-16g 2',
      'null vllm t4-16g 2',
      't4-tp2 sglang t4-16g 2',
    ]);
    expect(options.every((o) => o.fits)).toBe(true);
    // Fewer cards first.
    expect(options.map((o) => o.cards)).toEqual(options.map((o) => o.cards).sort((a, b) => a - b));
    expect(options.find((o) => o.profile === 'l4-tp1')).toMatchObject({
      tp: 1,
      weights_gib: 14.19,
      kv_gib: 1.75,
    });
  });

  it('a context past what a card holds says why, and the largest that fits', async () => {
    // One MIG instance: no more cards to try, so the answer is a shorter context, a larger
    // profile of the card or the whole card (the 7g.80gb holds the 64 GiB of KV, no smaller one).
    const r = await post({ source: llamaSource, classes: ['a100-80g-mig-1g.10gb'], context: 131072 });
    expect(r.status).toBe(200);
    const [o] = r.body.options as PlanOption[];
    expect(o).toMatchObject({ engine: 'llamacpp', class: 'a100-80g-mig-1g.10gb', cards: 1, fits: false });
    const m =
      /^needs [\d.]+ GiB a card on a100-80g-mig-1g\.10gb \(weights [\d.]+, KV 64\.0 at 524288 tokens \(4 slots of 131072\), overhead [\d.]+\), the card gives 9\.8: a context up to (\d+) fits with 4 slots, or a larger MIG profile such as a100-80g-mig-7g\.80gb, or a whole a100-80g card$/.exec(
        String(o?.reason),
      );
    expect(m).not.toBeNull();
    expect(o?.max_context).toBe(Number(m?.[1]));
    expect(o?.max_context).toBeLessThan(131072);
  });

  it('plans a source before anything is added: a GGUF on llama.cpp alone', async () => {
    const r = await post({ source: llamaSource, classes: ['a100-80g'], context: 8192 });
    expect(r.status).toBe(200);
    expect(r.body.model).toBe(llamaSource);
    expect(r.body.context).toBe(8192);
    expect(r.body.options).toEqual([
      expect.objectContaining({
        profile: null,
        engine: 'llamacpp',
        class: 'a100-80g',
        cards: 1,
        fits: true,
        reason: null,
      }),
    ]);
  });

  it('plans a definition without storing it', async () => {
    const spec = {
      ...qwen,
      name: 'draft',
      profiles: [{ name: 'mine', engine: 'vllm', gpu_class: 'l4-24g', tp: 2, gpus_per_node: 2 }],
    };
    const r = await post({ spec, classes: ['l4-24g'] });
    expect(r.status).toBe(200);
    expect(r.body.model).toBe('draft');
    expect(r.body.options.map((o: { profile: string | null }) => o.profile)).toContain('mine');
    expect((await api(t.url, t.adminKey, 'GET', '/models/draft')).status).toBe(404);
  });

  it('takes the classes of the nodes, with the memory they report, and CPUs', async () => {
    agents.push(await startTestAgent(t, 'gpu-node', [a100(0, { memory_total_mib: 81000 })]));
    // Joined is not yet reported: wait for its card.
    const cards = async () =>
      ((await api(t.url, t.adminKey, 'GET', '/nodes')).body.items as { devices: unknown[] }[])[0]?.devices
        .length ?? 0;
    for (let i = 0; i < 200 && (await cards()) === 0; i++) await new Promise((r) => setTimeout(r, 25));
    const r = await get('model=qwen-7b');
    expect(r.status).toBe(200);
    const classes = new Set((r.body.options as { class: string }[]).map((o) => o.class));
    // The node's class, and the classes the profiles are pinned to; no CPUs for safetensors.
    expect([...classes].sort()).toEqual(['a100-80g', 'l4-24g', 't4-16g']);
    const vllm = (r.body.options as PlanOption[]).find((o) => o.profile === null && o.engine === 'vllm');
    // 0.92 of the 81000 MiB the node reported, not the class's 81920.
    expect(vllm).toMatchObject({ class: 'a100-80g', budget_gib: 72.77 });
    const gguf = await post({ source: llamaSource });
    expect((gguf.body.options as { class: string }[]).map((o) => o.class).sort()).toEqual([
      'a100-80g',
      'cpu',
    ]);
  });

  const refusals: [string, () => ReturnType<typeof api>, number, string][] = [
    [
      'an unknown model, with the nearest name',
      () => get('model=qwen-7c&class=l4-24g'),
      404,
      'model "qwen-7c" does not exist; did you mean "qwen-7b"? (llmgw ctl models lists them)',
    ],
    [
      'an unknown class, with the known ones',
      () => get('model=qwen-7b&class=l4'),
      400,
      'unknown device class "l4": "l4" names a card but not its memory: write the model and memory, e.g. "l4-80g" (llmgw ctl nodes lists the classes your nodes have). Classes known here: a100-40g, a100-80g, h100-80g, h200-141g, l4-24g, cpu',
    ],
    [
      'a source whose shape is unknown',
      () => post({ source: 'hf://org/no-config', classes: ['l4-24g'] }),
      412,
      'hf://org/no-config cannot be planned: its shape (layers, heads, weights) is not known: hf://org/no-config has neither a GGUF file nor a config.json: what the model is (its shape) is unknown',
    ],
    [
      'a context that is no number of tokens',
      () => get('model=qwen-7b&class=l4-24g&context=32k'),
      400,
      'a context is a whole number of tokens from 256 to 16777216, not "32k"',
    ],
    [
      'no model',
      () => get('class=l4-24g'),
      400,
      'name the model to plan: GET /api/v1/plan?model=NAME, or POST /api/v1/plan with a spec or a source',
    ],
    [
      'a model and a source at once',
      () => post({ model: 'qwen-7b', source: llamaSource }),
      400,
      'give exactly one of model (a model of the catalog), spec (a model definition) or source (hf://ORG/REPO, a URL or a path); got 2',
    ],
  ];
  it.each(refusals)('refuses %s', async (_name, call, status, message) => {
    const r = await call();
    expect(r.body.error.message).toBe(message);
    expect(r.status).toBe(status);
  });

  it("lets a user key plan the catalog's models, and refuses it a source", async () => {
    const key = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader', role: 'user' })).body
      .secret as string;
    expect((await api(t.url, key, 'GET', '/plan?model=qwen-7b&class=l4-24g')).status).toBe(200);
    const r = await api(t.url, key, 'POST', '/plan', { source: llamaSource, classes: ['l4-24g'] });
    expect(r.body.error.message).toBe(
      `planning a definition or a source resolves it as adding a model does, which needs an admin key; key "reader" has the user role (any key plans the catalog's models: ?model=NAME)`,
    );
    expect(r.status).toBe(403);
  });

  it('refuses a model of the catalog whose shape is unknown, saying what is', async () => {
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'no-shape',
      source: 'hf://org/no-config',
      profiles: [{ name: 'p', engine: 'vllm', gpu_class: 'l4-24g' }],
    });
    expect(added.status).toBe(201);
    const r = await get('model=no-shape&class=l4-24g');
    expect(r.body.error.message).toBe(
      'model "no-shape" cannot be planned: its shape (layers, heads, weights) is not known: hf://org/no-config has neither a GGUF file nor a config.json: what the model is (its shape) is unknown',
    );
    expect(r.status).toBe(412);
  });

  it('refuses a definition that is not valid, as model add does', async () => {
    const r = await post({ spec: { name: 'x', source: llamaSource, profiles: [] }, classes: ['l4-24g'] });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(
      /^invalid model, nothing was changed:\n.*a model needs at least one profile/s,
    );
  });
});
