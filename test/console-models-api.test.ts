import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Api, ApiError, type ModelRead, type ModelView } from '../console/src/api.js';
import { countRows, type CountAnswer } from '../console/src/views/models-gpus.js';
import { isModelView } from '../src/protocol/model-views.js';
import { parseModelYaml, placeIssues } from '../console/src/views/models-yaml.js';
import { planRows } from '../console/src/views/plan-rows.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { api as rawApi, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { testRepos } from './support/hub.js';
import { a100 } from './support/inventory.js';

/** An admin key reads the whole model (ModelView). */
function asAdminView(m: ModelRead): ModelView {
  if (!isModelView(m)) throw new Error(`model ${m.name} was read without its source: not an admin's view`);
  return m;
}

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

/** The console's client and its Models and Plan logic against a real control plane, over real HTTP. */
describe("the console's Models and Plan calls", () => {
  let t: TestControlPlane;
  let api: Api;
  const agents: TestAgent[] = [];

  beforeAll(async () => {
    t = await startControlPlane({ config: declared, repos: testRepos() });
    api = new Api({ key: t.adminKey, fetch: (input, init) => fetch(`${t.url}${input as string}`, init) });
    agents.push(await startTestAgent(t, 'gpu-a', [l4(0), l4(1)]));
    agents.push(await startTestAgent(t, 'gpu-b', [l4(0), l4(1), l4(2), l4(3)]));
    const reported = async () =>
      ((await rawApi(t.url, t.adminKey, 'GET', '/nodes')).body.items as { devices: unknown[] }[]).filter(
        (n) => n.devices.length > 0,
      ).length;
    for (let i = 0; i < 400 && (await reported()) < 2; i++) await new Promise((r) => setTimeout(r, 25));
    expect(await reported()).toBe(2);
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
  });

  const yaml = (cls: string) => `name: qwen-7b
source: hf://Qwen/Qwen2.5-7B-Instruct
replicas: 0
profiles:
  - name: l4
    engine: vllm
    gpu_class: ${cls}
`;

  it("adds from YAML: the server's issue placed at the field's line, nothing stored; then added", async () => {
    const parsed = parseModelYaml(yaml('l4-24'));
    if (!parsed.ok) throw new Error(parsed.message);
    const e = await api.addModel(parsed.value).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    const issues = placeIssues(yaml('l4-24'), (e as ApiError).issues);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ path: 'profiles[0].gpu_class', line: 7 });
    expect(issues[0]?.message).toMatch(/l4-24/);
    expect((await api.models()).map((m) => m.name)).toEqual(['team-qwen']);

    const good = parseModelYaml(yaml('l4-24g'));
    if (!good.ok) throw new Error(good.message);
    expect((await api.addModel(good.value)).name).toBe('qwen-7b');
  });

  it('the GPUs… rows: each count checked by dry runs, the refused with the server reason, nothing changed', async () => {
    const answers = new Map<number, CountAnswer>();
    for (const n of [2, 3, 4, 8]) {
      answers.set(
        n,
        await api.modelGpus('qwen-7b', { gpus: n, dry_run: true }).then(
          (check) => ({ ok: true as const, check }),
          (e: unknown) => ({ ok: false as const, message: (e as Error).message }),
        ),
      );
    }
    const rows = countRows(1, answers, [1, 2, 3, 4, 8]);
    expect(rows.map((r) => [r.cards, r.state])).toEqual([
      [1, 'current'],
      [2, 'fits'],
      [3, 'refused'],
      [4, 'fits'],
      [8, 'refused'],
    ]);
    expect(rows[2]?.reason).toMatch(/^vLLM cannot spread qwen-7b over 3 cards \(tensor parallel 3\)/);
    expect(rows[4]?.reason).toMatch(/^vLLM cannot spread qwen-7b over 8 cards \(tensor parallel 8\)/);
    expect(rows[1]?.need_gib).toBeLessThan(rows[0]?.need_gib ?? 0);
    expect(asAdminView(await api.model('qwen-7b')).profiles[0]).toMatchObject({ gpus_per_node: 1, tp: 1 });
  });

  it('a change applied: the catalog lists the model with its rolling change', async () => {
    const done = await api.modelGpus('qwen-7b', { gpus: 2 });
    expect(done.rollout).toMatchObject({ change: 'gpus 1 → 2' });
    const listed = (await api.models()).filter(isModelView).find((m) => m.name === 'qwen-7b');
    expect(listed?.status.rollout).toMatchObject({ model: 'qwen-7b', change: 'gpus 1 → 2', by: 'admin' });
    expect(
      (await api.models()).filter(isModelView).find((m) => m.name === 'team-qwen')?.status.rollout,
    ).toBeUndefined();
  });

  it("a declared model's change refused with the hint to edit the settings", async () => {
    await expect(api.modelGpus('team-qwen', { gpus: 2, dry_run: true })).rejects.toThrow(
      /^model "team-qwen" is declared in the settings file .*llmgw ctl config edit$/,
    );
  });

  it("the Plan table for a model of the catalog on the classes asked, and a refused class in the server's words", async () => {
    const a = await api.plan({ model: 'qwen-7b', context: 8192, classes: ['l4-24g'] });
    expect(a.context).toBe(8192);
    const rows = planRows(a);
    expect(rows.find((r) => r.cells[0] === 'l4')?.cells.slice(0, 5)).toEqual([
      'l4',
      'vllm',
      'l4-24g',
      '2', // on 2 cards since the change above
      'yes',
    ]);
    expect(rows.every((r) => r.cells[2] === 'l4-24g')).toBe(true);
    await expect(api.plan({ model: 'qwen-7b', classes: ['l4'] })).rejects.toThrow(
      /^unknown device class "l4"/,
    );
  });
});
