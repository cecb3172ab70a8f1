import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { setModelContext } from '../src/server/services/model-context.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { llamaGgufFile, llamaGgufRepo } from './support/hub.js';
import { fakeLlamaSettings, recordingLlamaServer, until } from './support/fleet.js';
import { a100 } from './support/inventory.js';
import { readyCpuReplicas } from './support/cpu-replicas.js';
import { localModel } from './support/local-model.js';

const declared = `models:
  - name: tiny
    source: /models/tiny.gguf
    profiles:
      - name: cpu
        engine: llamacpp
        cpu: true
`;

/** Qwen2.5-7B-Instruct (trained for 32768 tokens); no replicas, so no engine starts. */
const qwen = {
  name: 'qwen',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 8192,
  max_output: 8192,
  replicas: 0,
  profiles: [
    { name: 'l4', engine: 'vllm', gpu_class: 'l4-24g', args: ['--max-model-len', '8192', '--enforce-eager'] },
  ],
};
/** Llama 3.1 8B Q4_K_M on CPUs (trained for 131072 tokens). */
const llamaCpu = {
  name: 'llama-cpu',
  source: `hf://${llamaGgufRepo}/${llamaGgufFile}`,
  context_length: 4096,
  replicas: 0,
  profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true, args: ['-c', '16384', '-np', '4'] }],
};
const trt = {
  name: 'trt',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  replicas: 0,
  profiles: [{ name: 'h100', engine: 'trtllm', gpu_class: 'h100-80g' }],
};

/** POST /api/v1/models/{name}/context over real HTTP, against the fake hub's repositories and a joined node. */
describe('POST /api/v1/models/{name}/context', () => {
  let t: TestControlPlane;
  let agent: TestAgent | undefined;
  let userKey: string;
  const context = (name: string, body: unknown, key = t.adminKey) =>
    api(t.url, key, 'POST', `/models/${name}/context`, body);
  const model = (name: string) => api(t.url, t.adminKey, 'GET', `/models/${name}`);

  beforeAll(async () => {
    t = await startControlPlane({ config: declared });
    for (const m of [qwen, llamaCpu, trt])
      expect((await api(t.url, t.adminKey, 'POST', '/models', m)).status).toBe(201);
    userKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader', role: 'user' })).body.secret;
    // One node: an L4 that reports 18000 MiB (less than the class's 23034), and 64 GiB of RAM.
    agent = await startTestAgent(t, 'gpu-node', [
      a100(0, { name: 'NVIDIA L4', class: 'l4-24g', memory_total_mib: 18000 }),
    ]);
    const cards = async () =>
      ((await api(t.url, t.adminKey, 'GET', '/nodes')).body.items as { devices: unknown[] }[])[0]?.devices
        .length ?? 0;
    for (let i = 0; i < 200 && (await cards()) === 0; i++) await new Promise((r) => setTimeout(r, 25));
  });
  afterAll(async () => {
    await agent?.stop();
    await t.stop();
  });

  it("changes a vLLM model's context: its args, max_output that was the whole context, the memory before and after, audited", async () => {
    const r = await context('qwen', { tokens: 16384 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      model: 'qwen',
      before: 8192,
      after: 16384,
      max_output: 16384,
      trained: 32768,
      rollout: { model: 'qwen', change: 'context 8192 → 16384', mode: 'surge', by: 'admin', total: 0 },
      // No replica runs (replicas: 0), so none starts again.
      restarted: 0,
    });
    expect(r.body.note).toBeUndefined();
    const [p] = r.body.profiles;
    expect(p).toMatchObject({ profile: 'l4', engine: 'vllm', class: 'l4-24g' });
    expect(p.args).toEqual(['--max-model-len', '16384', '--enforce-eager']);
    // Against the 18000 MiB the node reported: vLLM's 0.92 of it.
    expect(p.before.budget_gib).toBe(16.17);
    expect(p.before.words).toMatch(/^[\d.]+ of 16\.2 GiB a card \(weights 14\.2, KV 0\.4 at 8192 tokens\)$/);
    expect(p.after.words).toMatch(/^[\d.]+ of 16\.2 GiB a card \(weights 14\.2, KV 0\.9 at 16384 tokens\)$/);
    expect(p.after.need_gib).toBeGreaterThan(p.before.need_gib);

    const stored = await model('qwen');
    expect(stored.body).toMatchObject({ context_length: 16384, max_output: 16384 });
    expect(stored.body.profiles[0].args).toEqual(['--max-model-len', '16384', '--enforce-eager']);
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=model/qwen&action=model.context');
    expect(audit.body.items).toHaveLength(1);
    expect(audit.body.items[0]).toMatchObject({ actor: 'admin', action: 'model.context' });
    expect(audit.body.items[0].detail.changes).toEqual(
      expect.arrayContaining([
        { path: 'context_length', before: 8192, after: 16384 },
        { path: 'max_output', before: 8192, after: 16384 },
        { path: 'profiles[0].args[1]', before: '8192', after: '16384' },
      ]),
    );
  });

  it("recomputes a CPU profile's RAM against the node's, pool tokens × slots, in place when asked", async () => {
    const r = await context('llama-cpu', { tokens: 8192, slots: 2, in_place: true });
    expect(r.status).toBe(200);
    expect(r.body.rollout).toMatchObject({ change: 'context 4096 → 8192 × 2 slots', mode: 'in-place' });
    const [p] = r.body.profiles;
    expect(p.args).toEqual(['-c', '16384', '-np', '2']);
    expect(p.before.words).toMatch(
      / of 64\.0 GiB of RAM \(weights [\d.]+, KV 2\.0 at 4 slots × 4096 tokens\)$/,
    );
    expect(p.after.words).toMatch(
      / of 64\.0 GiB of RAM \(weights [\d.]+, KV 2\.0 at 2 slots × 8192 tokens\)$/,
    );
    expect(p.min_memory_gb).toBe(Math.ceil(p.after.need_gib * 10) / 10);
    const stored = (await model('llama-cpu')).body;
    expect(stored.context_length).toBe(8192);
    expect(stored.profiles[0]).toMatchObject({
      args: ['-c', '16384', '-np', '2'],
      min_memory_gb: p.min_memory_gb,
    });
  });

  const refusals: [string, string, unknown, number, string][] = [
    [
      'fewer than 256 tokens',
      'qwen',
      { tokens: 100 },
      400,
      'a context is a whole number of tokens from 256 to 16777216, not 100',
    ],
    [
      'no slots',
      'llama-cpu',
      { tokens: 8192, slots: 0 },
      400,
      'slots are the requests llama.cpp serves at once, 1 to 64, not 0',
    ],
    [
      'slots on a model without llama.cpp',
      'qwen',
      { tokens: 8192, slots: 2 },
      400,
      'slots are llama.cpp\'s (requests at once, each with the whole context), and model "qwen" has no llama.cpp profile: its engines share one KV pool among the requests they batch; leave slots out',
    ],
    [
      'a context past the trained one, naming it',
      'qwen',
      { tokens: 65536 },
      400,
      'qwen was trained for a context of 32768 tokens: past it the model answers worse, and vLLM refuses to start with it; ask for 32768 tokens or fewer',
    ],
    [
      'a context the reported card does not hold, with what fits',
      'qwen',
      { tokens: 32768 },
      412,
      'a context of 32768 tokens does not fit profile "l4" (vLLM on l4-24g): needs ',
    ],
    [
      'TensorRT-LLM',
      'trt',
      { tokens: 8192 },
      412,
      'profile "h100" runs TensorRT-LLM, whose context is fixed when its engine is built (max_seq_len, max_num_tokens): build the engine again for the new context and apply the model with it (llmgw ctl model apply -f FILE), or leave that profile out',
    ],
    [
      'a declared model, naming config edit',
      'tiny',
      { tokens: 8192 },
      409,
      'model "tiny" is declared in the settings file, so its context is changed there: edit its context_length (and its profiles\' args) with llmgw ctl config edit',
    ],
    [
      'an unknown model',
      'qwen2',
      { tokens: 8192 },
      404,
      'model "qwen2" does not exist; did you mean "qwen"? (llmgw ctl models lists them)',
    ],
    ['tokens that are not a number', 'qwen', { tokens: '32k' }, 400, 'invalid request body:\n'],
    ['an unknown field', 'qwen', { tokens: 8192, context: 1 }, 400, 'invalid request body:\n'],
  ];
  it.each(refusals)('refuses %s, and changes nothing', async (_name, name, body, status, message) => {
    const before = await model(name);
    const r = await context(name, body);
    expect(r.status).toBe(status);
    if (message.endsWith(': needs ') || message.endsWith('\n'))
      expect(r.body.error.message).toContain(message);
    else expect(r.body.error.message).toBe(message);
    expect(await model(name)).toMatchObject({ status: before.status, body: before.body });
  });

  it("refuses a context past the node's card with the planner's numbers and the commands that fit", async () => {
    const r = await context('qwen', { tokens: 32768 });
    expect(r.body.error.message).toMatch(
      /the card gives 16\.2 \(vLLM's 0\.92 of 17\.6\): a context up to (\d+) fits, or 2 cards \(llmgw ctl model context qwen \1, or llmgw ctl model gpus qwen 2 --profile l4\)$/,
    );
  });

  it('does not overwrite a change made while it was planned', async () => {
    const cp = t.cp;
    const racing = {
      checkRoll: (...args: Parameters<typeof cp.fleet.checkRoll>) => cp.fleet.checkRoll(...args),
      rollModel: async (...args: Parameters<typeof cp.fleet.rollModel>) => {
        // Another admin scales the model between the read and the write.
        await cp.catalog.patch('llama-cpu', { replicas: 2 }, 'other');
        return cp.fleet.rollModel(...args);
      },
    };
    const deps = { catalog: cp.catalog, registry: cp.registry, settings: cp.settings, fleet: racing };
    await expect(setModelContext(deps, 'llama-cpu', { tokens: 2048 }, 'admin')).rejects.toThrow(
      /^model "llama-cpu" changed since you read it \(version \d+, now \d+\): read it again and reapply your change$/,
    );
    const stored = (await model('llama-cpu')).body;
    expect(stored).toMatchObject({ replicas: 2, context_length: 8192 });
  });

  it('is for admins', async () => {
    const r = await context('qwen', { tokens: 8192 }, userKey);
    expect(r.status).toBe(403);
    expect((await model('qwen')).body.context_length).toBe(16384);
  });
});

/**
 * With replicas running (the fake llama-server on a CPU test agent): `restarted` says how many
 * start again on the change, as seed 003's ContextChange does, and they do.
 */
describe('POST /api/v1/models/{name}/context with replicas running', () => {
  let t: TestControlPlane;
  let agent: TestAgent | undefined;
  let dir = '';
  let engine: ReturnType<typeof recordingLlamaServer>;
  const context = (body: unknown) => api(t.url, t.adminKey, 'POST', '/models/tiny-cpu/context', body);
  const ready = (n: number) =>
    until(`${n} ready replicas of tiny-cpu`, () => {
      const list = t.cp.fleet.replicas('tiny-cpu');
      return list.length === n && list.every((r) => r.state === 'ready') ? list : undefined;
    });
  const rolled = () =>
    until('the rollout of tiny-cpu to end', async () => {
      const r = (await api(t.url, t.adminKey, 'GET', '/models/tiny-cpu')).body.status.rollout;
      return r !== undefined && r.state !== 'rolling' ? r : undefined;
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-context-'));
    engine = recordingLlamaServer(dir);
    t = await startControlPlane({ config: await fakeLlamaSettings(engine.bin) });
    // A CPU node of 16 threads: each replica takes half, so both fit it.
    agent = await startTestAgent(t, 'cpu-node');
    await readyCpuReplicas(t, { name: 'tiny-cpu', source: localModel(dir), replicas: 2 });
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says how many replicas start again, and they start on the new context', async () => {
    const r = await context({ tokens: 4096, in_place: true });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.restarted).toBe(2);
    expect(r.body.rollout).toMatchObject({ mode: 'in-place', total: 2 });
    expect(await rolled()).toMatchObject({ state: 'done', replaced: 2 });
    await ready(2);
    // The agents' 4 slots (llamacpp.parallel) × 4096 tokens, on both new engines.
    const relaunched = engine.launches().filter((l) => l.args.join(' ').includes('--ctx-size 16384'));
    expect(relaunched).toHaveLength(2);
  }, 60_000);

  it('restarts none when what they run is unchanged', async () => {
    const r = await context({ tokens: 4096 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.restarted).toBe(0);
    expect(r.body.rollout).toMatchObject({ total: 0 });
    expect(t.cp.fleet.replicas('tiny-cpu')).toHaveLength(2);
  });
});
