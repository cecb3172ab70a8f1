import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';

/** `llmgw ctl model gpus` as a user runs it (the built CLI, `npm run build` first), on a cluster with no node yet. */
describe('llmgw ctl model gpus', () => {
  let t: TestControlPlane;
  let env: Record<string, string>;
  const ctl = (...args: string[]) => llmgw(['ctl', 'model', 'gpus', ...args], env);
  const profile = { name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' };

  beforeAll(async () => {
    t = await startControlPlane();
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    for (const m of [
      { name: 'qwen-7b', source: 'hf://Qwen/Qwen2.5-7B-Instruct', replicas: 0, profiles: [profile] },
      {
        name: 'two',
        source: 'hf://Qwen/Qwen2.5-7B-Instruct',
        replicas: 0,
        profiles: [profile, { ...profile, name: 'l4-pair', tp: 2 }],
      },
    ])
      expect((await api(t.url, t.adminKey, 'POST', '/models', m)).status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  it('says before → after, what a card needs, how the replicas restart, and what it could not check', async () => {
    const r = await ctl('qwen-7b', '2');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toEqual([
      'model "qwen-7b", profile "l4" (vllm on l4-24g): 1 → 2 cards of a node a replica, tensor parallel 1 → 2',
      '  need a card: 17.6 of 20.7 GiB, fits → 9.5 of 20.7 GiB, fits',
      'No running replica runs what changed, so none restarts: new ones start with the change.',
      'Note: not checked: no node with l4-24g cards has joined: whether one has 2 is not checked',
    ]);
  });

  it('--json prints the API answer; --profile and --in-place reach it', async () => {
    const r = await ctl('two', '4', '--profile', 'l4-pair', '--in-place', '--json');
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(Object.keys(v).sort()).toEqual(['model', 'note', 'profiles', 'rollout']);
    expect(v).toMatchObject({
      model: 'two',
      profiles: [{ profile: 'l4-pair', before: { cards: 2, tp: 2 }, after: { cards: 4, tp: 4 } }],
      rollout: { change: 'gpus 2 → 4', mode: 'in-place', by: 'admin' },
    });
    const m = await api(t.url, t.adminKey, 'GET', '/models/two');
    expect(m.body.profiles[1]).toMatchObject({ name: 'l4-pair', tp: 4, gpus_per_node: 4 });
  });

  it('--dry-run checks the change and stores nothing; so does ctl model context --dry-run', async () => {
    const before = (await api(t.url, t.adminKey, 'GET', '/models/qwen-7b')).body;
    const r = await ctl('qwen-7b', '4', '--dry-run');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n').slice(-2)).toEqual([
      'Dry run: nothing stored or restarted; there is room for the change, and no running replica runs what changes, so none would start again.',
      'Note: not checked: no node with l4-24g cards has joined: whether one has 4 is not checked',
    ]);
    const json = await ctl('qwen-7b', '4', '--dry-run', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ model: 'qwen-7b', dry_run: true, restarted: 0 });
    const context = await llmgw(['ctl', 'model', 'context', 'qwen-7b', '4096', '--dry-run', '--json'], env);
    expect(context.stderr).toBe('');
    expect(JSON.parse(context.stdout)).toMatchObject({
      model: 'qwen-7b',
      after: 4096,
      dry_run: true,
      restarted: 0,
    });
    expect((await api(t.url, t.adminKey, 'GET', '/models/qwen-7b')).body).toEqual(before);
  });

  it('refuses a count that is not one as a usage error (exit 2), and says why the server refused (exit 1)', async () => {
    const usage = await ctl('qwen-7b', 'two');
    expect(usage.code).toBe(2);
    expect(usage.stdout).toBe('');
    expect(usage.stderr).toContain(
      'the count is a whole number of cards from 1 to 64, such as 2 (got "two")',
    );

    const refused = await ctl('two', '2');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'model "two" has several GPU profiles (l4, l4-pair): say which with --profile (profile in the API)',
    );
  });
});
