import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ModelSpec } from '../src/catalog/model-spec.js';
import { LlmgwError } from '../src/core/errors.js';
import type { RolloutView } from '../src/protocol/rollout-views.js';

import { startTestAgent, type TestAgent } from './support/agents.js';
import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { fakeLlamaServer, freePort } from './fakes/engines/fake-engines.js';
import { fakeLlamaSettings, until } from './support/fleet.js';
import { subscribeEvents } from './support/sse.js';
import { localModel } from './support/local-model.js';

// Issue 12 item 6: a change rolls over a model's replicas, beside each (surge) or in place, one
// at a time; a successor that fails halts it with the engine's error; restarts are rollouts too.
// Each node here is a CPU machine of 16 threads: a CPU replica takes half, so two fit a node.

/** The model of these tests: CPU replicas of llama.cpp, over an empty GGUF file (the fake reads none). */
function cpuModel(name: string, source: string, replicas: number) {
  return {
    name,
    source,
    replicas,
    context_length: 2048,
    profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
  };
}

describe('rolling changes over replicas on test agents', () => {
  let t: TestControlPlane;
  const agents: TestAgent[] = [];
  let dir = '';
  let source = '';
  /** While it exists, every llama-server started exits at once with an error, as one that cannot load would. */
  let failFile = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-rollouts-'));
    source = localModel(dir);
    failFile = join(dir, 'fail');
    const bin = join(dir, 'llama-server');
    writeFileSync(
      bin,
      [
        '#!/bin/sh',
        `if [ -f "${failFile}" ]; then echo "E srv    load_model: error: the fake cannot load the model (${failFile} exists)" >&2; exit 1; fi`,
        `exec "${process.execPath}" "${fakeLlamaServer}" "$@"`,
        '',
      ].join('\n'),
    );
    chmodSync(bin, 0o755);
    t = await startControlPlane({ config: await fakeLlamaSettings(bin) });
    agents.push(await startTestAgent(t, 'node-a'), await startTestAgent(t, 'node-b'));
  });
  afterAll(async () => {
    for (const a of agents) await a.stop();
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const addModel = async (name: string, replicas: number) => {
    const r = await api(t.url, t.adminKey, 'POST', '/models', cpuModel(name, source, replicas));
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  };
  const specOf = async (name: string): Promise<ModelSpec> => {
    const m = await t.cp.store.models.get(name);
    if (m === undefined) throw new Error(`no model ${name}`);
    return m.spec;
  };
  /** What the commands' write does: stores the spec, audited as the admin. */
  const writer = (name: string, next: ModelSpec) => async () => {
    await t.cp.store.models.update(name, () => next, { actor: 'admin', action: 'model.update' });
  };
  const ready = (model: string) => t.cp.fleet.replicas(model).filter((r) => r.state === 'ready');
  const allReady = (model: string, n: number) =>
    until(`${n} ready replicas of ${model}`, () => {
      const list = t.cp.fleet.replicas(model);
      return list.length === n && list.every((r) => r.state === 'ready') ? list : undefined;
    });
  const rolloutOf = async (model: string) =>
    (await api(t.url, t.adminKey, 'GET', `/models/${model}`)).body.status.rollout as RolloutView | undefined;
  const finished = (model: string, timeoutMs = 40_000) =>
    until(
      `the rollout of ${model} to end`,
      async () => {
        const r = await rolloutOf(model);
        return r !== undefined && r.state !== 'rolling' ? r : undefined;
      },
      timeoutMs,
    );
  /** The fewest ready replicas of a model seen while `work` runs, sampled every 50 ms. */
  const fewestReady = async (model: string, work: () => Promise<unknown>): Promise<number> => {
    let fewest = Number.POSITIVE_INFINITY;
    const on = { value: true };
    const sampler = (async () => {
      while (on.value) {
        fewest = Math.min(fewest, ready(model).length);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      await work();
    } finally {
      on.value = false;
      await sampler;
    }
    return fewest;
  };
  const refusal = async (p: Promise<unknown>): Promise<LlmgwError> => {
    try {
      await p;
    } catch (e) {
      if (e instanceof LlmgwError) return e;
      throw e;
    }
    throw new Error('expected a refusal');
  };

  it('rolls a change beside each replica, never with fewer ready replicas than before', async () => {
    await addModel('a', 2);
    const before = await allReady('a', 2);
    const events = await subscribeEvents(t.url, t.adminKey);
    await events.next((e) => e.event === 'ready');
    const next = { ...(await specOf('a')), context_length: 4096 };
    let view: RolloutView | undefined;
    const fewest = await fewestReady('a', async () => {
      view = await t.cp.fleet.rollModel(
        'a',
        next,
        { inPlace: false, actor: 'admin', change: 'context 2048 → 4096' },
        writer('a', next),
      );
      await finished('a');
    });
    expect(view).toMatchObject({
      model: 'a',
      change: 'context 2048 → 4096',
      mode: 'surge',
      by: 'admin',
      state: 'rolling',
      replaced: 0,
      total: 2,
    });
    expect(fewest).toBe(2);
    expect(await rolloutOf('a')).toMatchObject({ state: 'done', replaced: 2, total: 2 });
    const after = await allReady('a', 2);
    expect(after.map((r) => r.id).some((id) => before.some((b) => b.id === id))).toBe(false);
    const stored = await t.cp.store.fleet.replicas();
    for (const r of after) expect(stored.find((s) => s.id === r.id)?.spec.context_length).toBe(4096);
    const [end] = await t.cp.store.audit.list({ target: 'model/a', action: 'model.rollout.done' });
    expect(end).toMatchObject({ actor: 'system', detail: { change: 'context 2048 → 4096', by: 'admin' } });
    // GET /events told of it: the rollout (started, progressed, ended) and every replica it placed.
    const of = (topic: string, key: string) =>
      events.events
        .filter((e) => e.event === topic)
        .flatMap((e) => (e.data as Record<string, string[]>)[key] ?? []);
    expect(events.events.filter((e) => e.event === 'rollouts').length).toBeGreaterThanOrEqual(2);
    expect(new Set(of('rollouts', 'models'))).toEqual(new Set(['a']));
    expect(of('replicas', 'replicas')).toEqual(
      expect.arrayContaining([...before, ...after].map((r) => r.id)),
    );
    events.close();
  });

  it('ends at once a change of a profile no replica runs, restarting none', async () => {
    await addModel('idle', 1);
    const [only] = await allReady('idle', 1);
    const spec = await specOf('idle');
    const gpu = { ...spec.profiles[0]!, name: 'gpu', cpu: false, gpu_class: 'l4-24g', gpus_per_node: 1 };
    // A GPU profile after the CPU one: the replica runs on CPUs and never ran the GPU profile.
    const withGpu: ModelSpec = { ...spec, profiles: [...spec.profiles, gpu] };
    await writer('idle', withGpu)();
    await t.cp.fleet.reconcile();
    const next: ModelSpec = {
      ...withGpu,
      profiles: [withGpu.profiles[0]!, { ...gpu, gpus_per_node: 2 }],
    };
    const view = await t.cp.fleet.rollModel(
      'idle',
      next,
      { inPlace: false, actor: 'admin', change: 'gpus 1 → 2' },
      writer('idle', next),
    );
    expect(view).toMatchObject({ state: 'done', replaced: 0, total: 0 });
    expect(t.cp.fleet.replicas('idle').map((r) => r.id)).toEqual([only?.id]);
    // The room it took is for the tests after it.
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/idle')).status).toBe(200);
    await until('the idle model to be gone', () =>
      t.cp.fleet.replicas('idle').length === 0 ? true : undefined,
    );
  });

  it("halts a change whose new replica fails: the old ones keep serving, and the rollout says the engine's error", async () => {
    const before = await allReady('a', 2);
    const good = await specOf('a');
    // The fake llama-server exits 1 on an adapter it cannot open, as llama.cpp does.
    const broken: ModelSpec = {
      ...good,
      profiles: good.profiles.map((p) => ({ ...p, args: ['--lora', '/nonexistent/adapter.gguf'] })),
    };
    const fewest = await fewestReady('a', async () => {
      await t.cp.fleet.rollModel(
        'a',
        broken,
        { inPlace: false, actor: 'admin', change: 'args' },
        writer('a', broken),
      );
      const failed = await finished('a');
      expect(failed).toMatchObject({ state: 'failed', finished_at: expect.any(String) });
      expect(failed.error).toMatch(
        /^replica a-\d+: llama-server exited with code 1; its last error line: .*exiting due to model loading error$/,
      );
      // A while later: still halted, nothing else replaced.
      await new Promise((r) => setTimeout(r, 3000));
    });
    expect(fewest).toBe(2);
    const list = t.cp.fleet.replicas('a');
    const old = list.filter((r) => before.some((b) => b.id === r.id));
    expect(old.map((r) => r.state)).toEqual(['ready', 'ready']);
    // One of them was marked to be replaced and keeps serving; the other was never marked.
    expect(old.filter((r) => r.retiring === true)).toHaveLength(1);
    const [end] = await t.cp.store.audit.list({ target: 'model/a', action: 'model.rollout.failed' });
    expect(end?.actor).toBe('system');
    const error = (await rolloutOf('a'))?.error ?? '';
    expect(end?.detail['error']).toBe(error);

    // ctl model show says so (the built CLI: npm run build first), in words and in --json.
    const env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey };
    const shown = await llmgw(['ctl', 'model', 'show', 'a'], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`Change:             args, surge, by admin: failed: ${error}\n`);
    const json = JSON.parse((await llmgw(['ctl', 'model', 'show', 'a', '--json'], env)).stdout);
    expect(json.status.rollout).toMatchObject({ change: 'args', state: 'failed', error });

    // A later change starts afresh, and rolls.
    const fixed = { ...good, context_length: 8192 };
    const fresh = await t.cp.fleet.rollModel(
      'a',
      fixed,
      { inPlace: false, actor: 'admin', change: 'context 4096 → 8192' },
      writer('a', fixed),
    );
    expect(fresh).toMatchObject({ change: 'context 4096 → 8192', state: 'rolling' });
    expect(await finished('a')).toMatchObject({ state: 'done', change: 'context 4096 → 8192' });
    await allReady('a', 2);
  });

  it('refuses a change with no room beside a replica, naming --in-place, and changes nothing', async () => {
    await addModel('b', 2);
    await allReady('b', 2);
    const stored = await t.cp.store.models.get('b');
    const next = { ...stored!.spec, context_length: 4096 };
    let written = false;
    const e = await refusal(
      t.cp.fleet.rollModel('b', next, { inPlace: false, actor: 'admin', change: 'context' }, async () => {
        written = true;
        await writer('b', next)();
      }),
    );
    expect(e.code).toBe('conflict');
    expect(e.message).toMatch(
      /^no room beside replica b-\d+ for a replica of the changed model b \(no ready node has half its CPU threads free .*\): roll the change in place with --in-place, which stops each replica first, one at a time$/,
    );
    expect(written).toBe(false);
    expect(await t.cp.store.models.get('b')).toEqual(stored);
    expect(await t.cp.store.rollouts.get('b')).toBeUndefined();
    expect((await t.cp.store.fleet.replicas()).filter((r) => r.model === 'b' && r.retiring)).toEqual([]);
  });

  it('rolls a change in place, one replica at a time', async () => {
    const before = await allReady('b', 2);
    const next = { ...(await specOf('b')), context_length: 4096 };
    const fewest = await fewestReady('b', async () => {
      const view = await t.cp.fleet.rollModel(
        'b',
        next,
        { inPlace: true, actor: 'admin', change: 'context 2048 → 4096' },
        writer('b', next),
      );
      expect(view).toMatchObject({ mode: 'in-place', state: 'rolling', total: 2 });
      expect(await finished('b')).toMatchObject({ state: 'done', mode: 'in-place', replaced: 2 });
    });
    // Never more than one of the two down.
    expect(fewest).toBe(1);
    const after = await allReady('b', 2);
    expect(after.some((r) => before.some((b) => b.id === r.id))).toBe(false);
    const removed = (await t.cp.store.audit.list({ action: 'replica.remove', limit: 50 }))
      .filter((e) => before.some((b) => `replica/${b.id}` === e.target))
      .map((e) => e.detail['reason']);
    expect(removed).toEqual(['the model changed (in place)', 'the model changed (in place)']);
  });

  it('records a restart as a rollout, in place where there is no room beside', async () => {
    const [victim] = await allReady('b', 2);
    const surge = await refusal(t.cp.fleet.restart(victim!.id!, false, 'admin'));
    expect(surge.message).toContain('restart it in place with --in-place');
    expect(await rolloutOf('b')).toMatchObject({ change: 'context 2048 → 4096', state: 'done' });
    await t.cp.fleet.restart(victim!.id!, true, 'admin');
    expect(await rolloutOf('b')).toMatchObject({
      change: `restart of ${victim!.id}`,
      mode: 'in-place',
      by: 'admin',
      state: 'rolling',
      total: 1,
    });
    expect(await finished('b')).toMatchObject({ state: 'done', replaced: 1, total: 1 });
    const list = await allReady('b', 2);
    expect(list.some((r) => r.id === victim!.id)).toBe(false);
  });

  it("reports a restart's failed new replica the same way, the other replica serving on", async () => {
    const [victim, other] = await allReady('b', 2);
    writeFileSync(failFile, '');
    try {
      await t.cp.fleet.restart(victim!.id!, true, 'admin');
      const failed = await finished('b');
      expect(failed).toMatchObject({ change: `restart of ${victim!.id}`, state: 'failed' });
      expect(failed.error).toMatch(
        /^replica b-\d+: llama-server exited with code 1; its last error line: E srv +load_model: error: the fake cannot load the model/,
      );
      expect(ready('b').map((r) => r.id)).toEqual([other!.id]);
    } finally {
      rmSync(failFile, { force: true });
    }
  });
});

describe('an in-place roll when the control plane restarts midway', () => {
  it('goes on in place from where it was, from what the store kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-rollouts-restart-'));
    const source = localModel(dir);
    const bin = join(dir, 'llama-server');
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`);
    chmodSync(bin, 0o755);
    // Same port, database, admin key and engine-key secret: as a control plane restarted by systemd.
    const same = {
      config: await fakeLlamaSettings(bin),
      listen: `127.0.0.1:${await freePort()}`,
      adminKey: 'restart-admin-key-0123456789abcdef',
      env: { LLMGW_ENGINE_KEY_SECRET: 'rollout-engine-key-secret-0123456789abcdef' },
    };
    const t1 = await startControlPlane(same);
    const agents = [await startTestAgent(t1, 'node-a'), await startTestAgent(t1, 'node-b')];
    let t2: TestControlPlane | undefined;
    try {
      expect((await api(t1.url, t1.adminKey, 'POST', '/models', cpuModel('c', source, 2))).status).toBe(201);
      const before = await until('2 ready replicas of c', () => {
        const list = t1.cp.fleet.replicas('c');
        return list.length === 2 && list.every((r) => r.state === 'ready') ? list : undefined;
      });
      const spec = (await t1.cp.store.models.get('c'))!.spec;
      // Successors that take a while to load: the control plane stops while the first one does.
      const next: ModelSpec = {
        ...spec,
        profiles: spec.profiles.map((p) => ({ ...p, env: { FAKE_LLAMA_LOAD_MS: '1500' } })),
      };
      await t1.cp.fleet.rollModel('c', next, { inPlace: true, actor: 'admin', change: 'env' }, async () => {
        await t1.cp.store.models.update('c', () => next, { actor: 'admin' });
      });
      expect(t1.cp.fleet.replicas('c').filter((r) => before.some((b) => b.id === r.id))).toHaveLength(1);
      const database = t1.cp.settings.current.settings.database;
      await t1.cp.stop();

      t2 = await startControlPlane({ ...same, database });
      const end = await until(
        'the rollout of c to end',
        async () => {
          const r = (await api(t2!.url, t2!.adminKey, 'GET', '/models/c')).body.status.rollout as
            RolloutView | undefined;
          return r?.state === 'rolling' ? undefined : r;
        },
        40_000,
      );
      expect(end).toMatchObject({ state: 'done', mode: 'in-place', change: 'env', replaced: 2, total: 2 });
      // Both old replicas stopped in place (none marked to stop beside a successor, as a surge would).
      const audit = await t2.cp.store.audit.list({ limit: 200 });
      const of = (id: string | null) => audit.filter((e) => e.target === `replica/${id ?? ''}`);
      for (const b of before) {
        expect(of(b.id).map((e) => `${e.action}: ${String(e.detail['reason'])}`)).toEqual([
          'replica.remove: the model changed (in place)',
          'replica.create: undefined',
        ]);
      }
    } finally {
      for (const a of agents) await a.stop();
      if (t2 === undefined) await t1.stop();
      else {
        await t2.stop();
        await t1.hub.close();
        rmSync(t1.dir, { recursive: true, force: true });
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
