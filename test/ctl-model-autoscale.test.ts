import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';

/** `llmgw ctl model autoscale` as a user runs it (the built CLI, `npm run build` first); no node joined. */
describe('llmgw ctl model autoscale', () => {
  let t: TestControlPlane;
  let env: Record<string, string>;
  const ctl = (...args: string[]) => llmgw(['ctl', 'model', ...args], env);

  beforeAll(async () => {
    t = await startControlPlane({ config: 'autoscale: {interval_s: 60}\n' });
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    const m = {
      name: 'qwen-7b',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      replicas: 2,
      profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' }],
    };
    expect((await api(t.url, t.adminKey, 'POST', '/models', m)).status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  it('sets the bounds, audited; show has a Scale section; --off goes back to the count it runs', async () => {
    const r = await ctl(
      'autoscale',
      'qwen-7b',
      '--min',
      '0',
      '--max',
      '4',
      '--target',
      '0.6',
      '--idle-s',
      '120',
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      'model "qwen-7b" autoscaled: 0 to 4 replicas at 0.6 load each, to zero after 120 s without a request\n',
    );
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=model/qwen-7b&action=model.autoscale');
    expect(audit.body.items[0]).toMatchObject({ actor: 'admin', action: 'model.autoscale' });

    const show = await ctl('show', 'qwen-7b');
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(
      [
        'Scale:              autoscaled, 0 to 4 replicas, target 0.6 load each, to zero after 120 s without a request',
        '  Now:              2 replicas',
        '  Last decision:    none yet',
      ].join('\n'),
    );

    const list = await llmgw(['ctl', 'models'], env);
    expect(list.stdout).toMatch(/\nqwen-7b +api +2 \(0-4\) /);

    // New bounds alone keep the target and idle time set before.
    const json = await ctl('autoscale', 'qwen-7b', '--min', '1', '--max', '3', '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      autoscale: { min: 1, max: 3, target: 0.6, idle_s: 120 },
      status: { scale: { replicas: 2 } },
    });

    const off = await ctl('autoscale', 'qwen-7b', '--off');
    expect(off.code).toBe(0);
    expect(off.stdout).toBe('model "qwen-7b" no longer autoscaled: it runs 2 replicas\n');
    expect((await ctl('show', 'qwen-7b')).stdout).not.toContain('Scale:');
  });

  it('refuses what is not a bound as a usage error (exit 2), and says why the server refused (exit 1)', async () => {
    const cases: [string[], number, string][] = [
      [
        ['--max', '2'],
        2,
        'error: give --min N and --max N (e.g. --min 0 --max 4), or --off for a fixed count\n',
      ],
      [
        ['--min', 'one', '--max', '2'],
        2,
        'error: --min is a whole number of 0 or more, such as 2 (got "one")\n',
      ],
      [
        ['--min', '0', '--max', '2', '--target', 'high'],
        2,
        'error: --target is a number, such as 0.7 (got "high")\n',
      ],
      [
        ['--off', '--min', '1'],
        2,
        'error: --off takes no bounds: give --off alone, or --min and --max without it\n',
      ],
    ];
    for (const [args, code, stderr] of cases) {
      const r = await ctl('autoscale', 'qwen-7b', ...args);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code, stderr });
    }
    const over = await ctl('autoscale', 'qwen-7b', '--min', '0', '--max', '2', '--target', '1.5');
    expect(over.code).toBe(1);
    expect(over.stderr).toContain('target: at most 1 (every slot busy), e.g. target: 0.7');
    const crossed = await ctl('autoscale', 'qwen-7b', '--min', '5', '--max', '2');
    expect(crossed.code).toBe(1);
    expect(crossed.stderr).toContain('min (5) is more than max (2): write min: 2 or less, or max: 5 or more');
    const missing = await ctl('autoscale', 'qwen-8b', '--min', '0', '--max', '2');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('model "qwen-8b" does not exist; did you mean "qwen-7b"?');
  });
});
