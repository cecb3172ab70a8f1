import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { fakeLlamaSettings, recordingLlamaServer, until } from './support/fleet.js';
import { readyCpuReplicas } from './support/cpu-replicas.js';
import { localModel } from './support/local-model.js';

/** `llmgw ctl model context` as a user runs it (the built CLI, `npm run build` first), on a cluster with no nodes. */
describe('llmgw ctl model context', () => {
  let t: TestControlPlane;
  let env: Record<string, string>;
  const ctl = (...args: string[]) => llmgw(['ctl', 'model', 'context', ...args], env);

  beforeAll(async () => {
    t = await startControlPlane();
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    const qwen = {
      name: 'qwen',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      context_length: 8192,
      replicas: 0,
      profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', qwen)).status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  it("shows each profile's memory before → after, and the rollout", async () => {
    const r = await ctl('qwen', '16384');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toEqual([
      'model "qwen": context 8192 → 16384 tokens (trained for 32768)',
      'max output: unset (the rest of the context)',
      expect.stringMatching(
        /^profile l4 \(vLLM on l4-24g\): [\d.]+ of 20\.7 GiB a card \(weights 14\.2, KV 0\.4 at 8192 tokens\) → [\d.]+ of 20\.7 GiB a card \(weights 14\.2, KV 0\.9 at 16384 tokens\)$/,
      ),
      '  args: --max-model-len 16384',
      'No running replica runs what changed, so none restarts: new ones start with the change.',
    ]);
  });

  it('--json prints the API answer', async () => {
    const r = await ctl('qwen', '8192', '--in-place', '--json');
    expect(r.code).toBe(0);
    const answer = JSON.parse(r.stdout);
    expect(Object.keys(answer).sort()).toEqual([
      'after',
      'before',
      'max_output',
      'model',
      'profiles',
      'restarted',
      'rollout',
      'trained',
    ]);
    expect(answer).toMatchObject({
      model: 'qwen',
      before: 16384,
      after: 8192,
      rollout: { mode: 'in-place' },
      restarted: 0,
    });
    expect((await api(t.url, t.adminKey, 'GET', '/models/qwen')).body.context_length).toBe(8192);
  });

  const usage: [string[], string][] = [
    [
      ['qwen', '32k'],
      'error: TOKENS is a whole number of tokens one request may use, such as 32768 (got "32k")',
    ],
    [
      ['qwen', '8192', '--slots', 'two'],
      'error: --slots is a whole number of requests at once, 1 to 64 (got "two")',
    ],
  ];
  it.each(usage)('a wrong command line %j exits 2 and says why', async (args, message) => {
    const r = await ctl(...args);
    expect(r.stderr.trim()).toBe(message);
    expect(r.code).toBe(2);
  });

  it("exits 1 with the server's refusal", async () => {
    const r = await ctl('qwen', '65536');
    expect(r.stderr.trim()).toBe(
      'error: qwen was trained for a context of 32768 tokens: past it the model answers worse, and vLLM refuses to start with it; ask for 32768 tokens or fewer',
    );
    expect(r.code).toBe(1);
  });

  it('is refused past 16777216 tokens alike by ctl model add, POST /models, the settings file and itself', async () => {
    const words = 'a context is a whole number of tokens from 256 to 16777216, not 1000000000000';
    const huge = {
      name: 'huge',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      context_length: 1_000_000_000_000,
      replicas: 0,
      profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' }],
    };
    const add = await llmgw(['ctl', 'model', 'add', '-f', '-'], env, JSON.stringify(huge));
    expect(add.stderr).toBe(`error: invalid model, nothing was changed:\ncontext_length: ${words}\n`);
    expect(add.code).toBe(1);
    const post = await api(t.url, t.adminKey, 'POST', '/models', huge);
    expect([post.status, post.body.error.message]).toEqual([
      400,
      `invalid model, nothing was changed:\ncontext_length: ${words}`,
    ]);
    const put = await api(
      t.url,
      t.adminKey,
      'PUT',
      '/config',
      `models:\n  - name: huge\n    source: hf://Qwen/Qwen2.5-7B-Instruct\n    context_length: 1000000000000\n    profiles: [{name: l4, engine: vllm, gpu_class: l4-24g}]\n`,
      { 'content-type': 'application/yaml' },
    );
    expect([put.status, put.body.error.message]).toEqual([
      400,
      `invalid settings, nothing was applied:\n${t.configPath}:4: models[0].context_length: ${words}`,
    ]);
    const context = await ctl('qwen', '1000000000000');
    expect(context.stderr).toBe(`error: ${words}\n`);
    expect(context.code).toBe(1);
    expect((await api(t.url, t.adminKey, 'GET', '/models/huge')).status).toBe(404);
  });
});

/** The same with replicas running (the fake llama-server on a CPU test agent): how many start again. */
describe('llmgw ctl model context with replicas running', () => {
  let t: TestControlPlane;
  let agent: TestAgent | undefined;
  let dir = '';
  let env: Record<string, string>;
  const ctl = (...args: string[]) => llmgw(['ctl', 'model', 'context', ...args], env);
  const rolled = () =>
    until('the rollout of tiny-cpu to end', async () => {
      const r = (await api(t.url, t.adminKey, 'GET', '/models/tiny-cpu')).body.status.rollout;
      return r !== undefined && r.state !== 'rolling' ? r : undefined;
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-ctl-context-'));
    t = await startControlPlane({ config: await fakeLlamaSettings(recordingLlamaServer(dir).bin) });
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    // A CPU node of 16 threads: each replica takes half, so both fit it.
    agent = await startTestAgent(t, 'cpu-node');
    await readyCpuReplicas(t, { name: 'tiny-cpu', source: localModel(dir), replicas: 2 });
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--json says how many replicas start again', async () => {
    const r = await ctl('tiny-cpu', '4096', '--in-place', '--json');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const answer = JSON.parse(r.stdout);
    expect(answer).toMatchObject({ before: 2048, after: 4096, restarted: 2, rollout: { total: 2 } });
    expect(await rolled()).toMatchObject({ state: 'done', replaced: 2 });
  }, 60_000);

  it('says it in words', async () => {
    const r = await ctl('tiny-cpu', '8192', '--in-place');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      'Its 2 replicas start again in place, one at a time: each stops before its successor starts.',
    );
    expect(await rolled()).toMatchObject({ state: 'done', change: 'context 4096 → 8192' });
  }, 60_000);
});
