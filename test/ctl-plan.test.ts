import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { childHome, llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { llamaGgufFile, llamaGgufRepo } from './support/hub.js';

/** `llmgw ctl plan` as a user runs it (the built CLI, `npm run build` first) against a control plane with no nodes. */
describe('llmgw ctl plan', () => {
  let t: TestControlPlane;
  let env: Record<string, string>;
  const ctl = (...args: string[]) => llmgw(['ctl', 'plan', ...args], env);

  beforeAll(async () => {
    t = await startControlPlane();
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    const qwen = {
      name: 'qwen-7b',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', qwen)).status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  it('prints a table, best first, on an empty cluster when the classes are named', async () => {
    const r = await ctl('qwen-7b', '--class', 'l4-24g,t4-16g');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('qwen-7b at 32768 tokens: per card, GiB');
    expect(lines[1]?.split(/\s{3,}/)).toEqual([
      'PROFILE',
      'ENGINE',
      'CLASS',
      'CARDS',
      'FITS',
      'NEED/CARD',
      'BUDGET',
      'WEIGHTS',
      'KV',
      'MAX CONTEXT',
      'REASON',
    ]);
    const rows = lines.slice(2).map((l) => l.split(/\s{2,}/));
    // The profile and the 2 other engines on an L4 at one card (vLLM's defaults are the profile's), then the 3 on two T4s.
    expect(rows.map((c) => c.slice(0, 5).join(' '))).toEqual([
      '- trtllm l4-24g 1 yes',
      'l4 vllm l4-24g 1 yes',
      '- sglang l4-24g 1 yes',
      '- trtllm t4-16g 2 yes',
      '- vllm t4-16g 2 yes',
      '- sglang t4-16g 2 yes',
    ]);
    expect(rows[1]?.slice(5)).toEqual(['17.6', '20.7', '14.2', '1.8', '32768']);
  });

  it('--json prints what the API answers', async () => {
    const r = await ctl('qwen-7b', '--class', 'l4-24g,t4-16g', '--context', '8192', '--json');
    expect(r.code).toBe(0);
    const fromApi = await api(
      t.url,
      t.adminKey,
      'GET',
      '/plan?model=qwen-7b&class=l4-24g,t4-16g&context=8192',
    );
    expect(JSON.parse(r.stdout)).toEqual(fromApi.body);
    expect(fromApi.body.context).toBe(8192);
  });

  it('plans a source, and cuts a long reason in the table, keeping what to do', async () => {
    const source = `hf://${llamaGgufRepo}/${llamaGgufFile}`;
    const r = await ctl('--source', source, '--class', 'a100-80g-mig-1g.10gb');
    expect(r.code).toBe(0);
    const [, , row, footer] = r.stdout.trimEnd().split('\n');
    expect(row).toMatch(
      /^-\s+llamacpp\s+a100-80g-mig-1g\.10gb\s+1\s+no\s+[\d.]+\s+9\.8\s+[\d.]+\s+64\.0\s+\d+\s+needs [\d.]+ GiB a card on … .*MIG profile such as a100-80g-mig-7g\.80gb, or a whole a100-80g card$/,
    );
    expect(footer).toBe('(--json gives each reason in full)');
  });

  it('plans a definition from a file, storing nothing', async () => {
    const file = join(childHome, 'draft.yaml');
    writeFileSync(
      file,
      'name: draft\nsource: hf://Qwen/Qwen2.5-7B-Instruct\ncontext_length: 8192\nprofiles:\n  - name: two-l4\n    engine: sglang\n    gpu_class: l4-24g\n    tp: 2\n    gpus_per_node: 2\n',
    );
    const r = await ctl('-f', file, '--class', 'l4-24g', '--json');
    expect(r.stderr).toBe('');
    const answer = JSON.parse(r.stdout) as {
      model: string;
      context: number;
      options: { profile: string | null; tp: number }[];
    };
    expect(answer).toMatchObject({ model: 'draft', context: 8192 });
    expect(answer.options.find((o) => o.profile === 'two-l4')).toMatchObject({ tp: 2, fits: true });
    expect((await api(t.url, t.adminKey, 'GET', '/models/draft')).status).toBe(404);
  });

  const refusals: [string, string[], number, string][] = [
    [
      'no classes on a cluster without nodes',
      ['qwen-7b'],
      1,
      'error: no node has joined, so there is no device class to plan for: name the classes (llmgw ctl plan --class l4-24g,a100-80g, or class= in the API)',
    ],
    [
      'an unknown model, with the nearest name',
      ['qwen-7', '--class', 'l4-24g'],
      1,
      'error: model "qwen-7" does not exist; did you mean "qwen-7b"? (llmgw ctl models lists them)',
    ],
    [
      'an unknown class, with the known ones',
      ['qwen-7b', '--class', 'L4-24G'],
      1,
      'error: unknown device class "L4-24G": write it in lower case: "l4-24g". Classes known here: a100-40g, a100-80g, h100-80g, h200-141g, l4-24g, cpu',
    ],
    [
      'nothing named to plan',
      ['--class', 'l4-24g'],
      2,
      'error: name one thing to plan: a model of the catalog (llmgw ctl plan MODEL), a definition (-f FILE) or a source (--source hf://ORG/REPO)',
    ],
    [
      'a context that is no number',
      ['qwen-7b', '--context', '32k'],
      2,
      'error: --context takes a number of tokens from 256, such as 32768 (got "32k")',
    ],
  ];
  it.each(refusals)('refuses %s', async (_name, args, code, message) => {
    const r = await ctl(...args);
    expect(r.stderr.trimEnd()).toBe(message);
    expect(r.code).toBe(code);
    expect(r.stdout).toBe('');
  });
});
