import { createHash } from 'node:crypto';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ModelSpec } from '../catalog/model-spec.js';
import { LlmgwError } from '../core/errors.js';

import type { Origin } from '../models/origin.js';
import { known, unknown, type ModelShape } from '../models/shape.js';

import { migrations } from './migrations.js';
import type { ModelOriginRecord, Store } from './store.js';
import type { NodeInventory } from '../gpu/types.js';

/**
 * What every Store must do, run against each implementation. `open` gives a fresh,
 * migrated store on its own database; `reopen` a second store on the same database
 * (another control plane, or the same one after a restart).
 */
export interface StoreHarness {
  open: () => Promise<Store>;
  reopen: () => Promise<Store>;
  /** Adds a migration this build does not know, as a newer llmgw would have. */
  addUnknownMigration: (name: string) => Promise<void>;
  cleanup: () => Promise<void>;
}

export interface ContractOptions {
  /**
   * Whether several control planes may share the database. SQLite is embedded: one
   * control plane owns the file (and a second connection in the same thread would
   * block the event loop waiting for the first).
   */
  shared: boolean;
}

const spec = (name: string, extra: Partial<ModelSpec> = {}): ModelSpec => ({
  name,
  source: '/models/tiny.gguf',
  replicas: 1,
  profiles: [
    {
      name: 'cpu',
      engine: 'llamacpp',
      cpu: true,
      tp: 1,
      pp: 1,
      gpus_per_node: 0,
      nodes: 1,
      args: [],
      env: {},
      adapters: [],
    },
  ],
  ...extra,
});

const origin: Origin = {
  source: 'hf://org/repo/m-Q4_K_M.gguf',
  kind: 'hf',
  repo: 'org/repo',
  revision: 'main',
  commit: 'a'.repeat(40),
  files: [{ path: 'm-Q4_K_M.gguf', size: 4_920_000_000, sha256: 'b'.repeat(64) }],
};

const shape: ModelShape = {
  from: 'gguf',
  architecture: 'llama',
  layers: known(32),
  attentionHeads: known(32),
  kvHeads: known(8),
  keyHeadDim: known(128),
  valueHeadDim: known(128),
  slidingWindow: known(null),
  mla: known(null),
  trainedContext: known(131072),
  parameters: unknown('the header gives no parameter count'),
  weightBytes: known(4_920_000_000),
  dtype: known('Q4_K_M'),
  kv: known({ elementBytes: 2, perToken: 131072, fullPerToken: 131072, slidingPerToken: 0 }),
};

const record = (model: string, extra: Partial<ModelOriginRecord> = {}): ModelOriginRecord => ({
  model,
  source: origin.source,
  origin,
  shape,
  problem: null,
  resolved_at: '2026-01-02T03:04:05.000Z',
  ...extra,
});

const hash = (s: string) => createHash('sha256').update(s).digest('hex');

async function refusal(p: Promise<unknown>): Promise<LlmgwError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof LlmgwError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

export function storeContract(name: string, options: ContractOptions, harness: () => StoreHarness): void {
  describe(`Store contract: ${name}`, () => {
    let h: StoreHarness;
    let store: Store;

    beforeAll(async () => {
      h = harness();
      store = await h.open();
    });
    afterAll(async () => {
      await store.close();
      await h.cleanup();
    });

    it('creates, reads and lists models, and audits the creation', async () => {
      const created = await store.models.create(spec('alpha'), 'alice');
      expect(created.version).toBe(1);
      expect(created.created_by).toBe('alice');
      const got = await store.models.get('alpha');
      expect(got?.spec).toEqual(spec('alpha'));
      expect((await store.models.list()).map((m) => m.spec.name)).toContain('alpha');
      const audit = await store.audit.list({ target: 'model/alpha' });
      expect(audit[0]).toMatchObject({ actor: 'alice', action: 'model.create', target: 'model/alpha' });
    });

    it('refuses a second model of the same name and changes nothing', async () => {
      await store.models.create(spec('dup'), 'alice');
      const e = await refusal(store.models.create(spec('dup', { replicas: 5 }), 'bob'));
      expect(e.code).toBe('conflict');
      expect(e.message).toContain('model "dup" already exists');
      expect((await store.models.get('dup'))?.spec.replicas).toBe(1);
      expect(await store.audit.list({ target: 'model/dup', actor: 'bob' })).toEqual([]);
    });

    it('updates a model under its version and records what changed', async () => {
      await store.models.create(spec('beta'), 'alice');
      const updated = await store.models.update('beta', (m) => ({ ...m.spec, replicas: 3 }), {
        actor: 'bob',
      });
      expect(updated.version).toBe(2);
      expect(updated.updated_by).toBe('bob');
      expect((await store.models.get('beta'))?.spec.replicas).toBe(3);
      const [entry] = await store.audit.list({ target: 'model/beta', action: 'model.update' });
      expect(entry?.actor).toBe('bob');
      expect(entry?.detail).toEqual({ version: 2, changes: [{ path: 'replicas', before: 1, after: 3 }] });
    });

    it('refuses an update against a stale version', async () => {
      await store.models.create(spec('gamma'), 'alice');
      const e = await refusal(
        store.models.update('gamma', (m) => ({ ...m.spec, replicas: 2 }), { actor: 'bob', expectVersion: 7 }),
      );
      expect(e.code).toBe('conflict');
      expect(e.message).toContain('changed since you read it (version 7, now 1)');
      expect((await store.models.get('gamma'))?.version).toBe(1);
    });

    it('leaves the store as it was when a change is refused midway', async () => {
      await store.models.create(spec('delta'), 'alice');
      const before = await store.audit.list({ target: 'model/delta' });
      await expect(
        store.models.update(
          'delta',
          () => {
            throw new LlmgwError('invalid_argument', 'nope');
          },
          { actor: 'bob' },
        ),
      ).rejects.toThrow('nope');
      expect((await store.models.get('delta'))?.version).toBe(1);
      expect(await store.audit.list({ target: 'model/delta' })).toEqual(before);
    });

    it('rolls back every write of a failed transaction', async () => {
      await expect(
        store.transaction(async (tx) => {
          await tx.models.create(spec('epsilon'), 'alice');
          await tx.audit.record({ actor: 'alice', action: 'test.note', target: 'model/epsilon', detail: {} });
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await store.models.get('epsilon')).toBeUndefined();
      expect(await store.audit.list({ target: 'model/epsilon' })).toEqual([]);
    });

    it('refuses to update or delete a model that does not exist', async () => {
      const u = await refusal(store.models.update('nope', (m) => m.spec, { actor: 'a' }));
      expect(u.code).toBe('not_found');
      expect(u.message).toBe('model "nope" does not exist (llmgw ctl models lists them)');
      const d = await refusal(store.models.delete('nope', 'a'));
      expect(d.code).toBe('not_found');
    });

    it('deletes a model and audits it', async () => {
      await store.models.create(spec('zeta'), 'alice');
      await store.models.delete('zeta', 'carol');
      expect(await store.models.get('zeta')).toBeUndefined();
      const [entry] = await store.audit.list({ target: 'model/zeta' });
      expect(entry).toMatchObject({ action: 'model.delete', actor: 'carol' });
    });

    it('keeps every update when many run at once', async () => {
      await store.models.create(spec('busy'), 'alice');
      const n = 25;
      await Promise.all(
        Array.from({ length: n }, (_, i) =>
          store.models.update(
            'busy',
            (m) => {
              const [p] = m.spec.profiles;
              return { ...m.spec, profiles: [{ ...p!, args: [...p!.args, `--flag-${i}`] }] };
            },
            { actor: `writer-${i}` },
          ),
        ),
      );
      const final = await store.models.get('busy');
      expect(final?.version).toBe(n + 1);
      expect(new Set(final?.spec.profiles[0]?.args)).toEqual(
        new Set(Array.from({ length: n }, (_, i) => `--flag-${i}`)),
      );
    });

    it("keeps each model's origin and shape, replaces them, and removes them", async () => {
      await store.origins.put(record('o-one'));
      const path = record('o-two', {
        source: '/models/m.gguf',
        origin: null,
        shape: null,
        problem: '/models/m.gguf is not on the control plane',
      });
      await store.origins.put(path);
      expect(await store.origins.get('o-one')).toEqual(record('o-one'));
      expect(await store.origins.get('o-two')).toEqual(path);
      expect(await store.origins.get('o-none')).toBeUndefined();

      const repinned = record('o-one', {
        origin: { ...origin, commit: 'c'.repeat(40) },
        shape: null,
        problem: 'the GGUF header could not be read',
        resolved_at: '2026-02-03T04:05:06.000Z',
      });
      await store.origins.put(repinned);
      expect(await store.origins.get('o-one')).toEqual(repinned);
      expect((await store.origins.list()).filter((r) => r.model.startsWith('o-'))).toEqual([repinned, path]);

      await store.origins.delete('o-two');
      await store.origins.delete('o-two');
      expect(await store.origins.get('o-two')).toBeUndefined();
    });

    it('writes a model and its origin in one transaction, or neither', async () => {
      await expect(
        store.transaction(async (tx) => {
          await tx.models.create(spec('o-tx'), 'alice');
          await tx.origins.put(record('o-tx'));
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await store.models.get('o-tx')).toBeUndefined();
      expect(await store.origins.get('o-tx')).toBeUndefined();
      await store.transaction(async (tx) => {
        await tx.models.create(spec('o-tx'), 'alice');
        await tx.origins.put(record('o-tx'));
      });
      expect(await store.origins.get('o-tx')).toEqual(record('o-tx'));
    });

    it('stores keys by hash only, finds them, and revokes them', async () => {
      const created = await store.keys.create(
        { name: 'ci', role: 'user', prefix: 'llmgw_key_ab', secretHash: hash('s1') },
        'admin',
      );
      expect(created).toMatchObject({ name: 'ci', role: 'user', revoked_at: null });
      expect((await store.keys.findActiveByHash(hash('s1')))?.name).toBe('ci');
      expect(await store.keys.findActiveByHash(hash('s2'))).toBeUndefined();
      const dup = await refusal(
        store.keys.create({ name: 'ci', role: 'admin', prefix: 'x', secretHash: hash('s3') }, 'admin'),
      );
      expect(dup.code).toBe('conflict');
      expect(dup.message).toBe('a key named "ci" already exists: revoke it first, or pick another name');
      await store.keys.revoke('ci', 'admin');
      expect(await store.keys.findActiveByHash(hash('s1'))).toBeUndefined();
      expect((await store.keys.list()).map((k) => k.name)).not.toContain('ci');
      expect((await store.keys.list({ includeRevoked: true })).find((k) => k.name === 'ci')?.revoked_by).toBe(
        'admin',
      );
      // The name is free again once its key is revoked.
      await store.keys.create({ name: 'ci', role: 'user', prefix: 'p', secretHash: hash('s4') }, 'admin');
      const again = await refusal(store.keys.revoke('nobody', 'admin'));
      expect(again.message).toBe('no live key is named "nobody" (llmgw ctl keys lists them)');
      const actions = (await store.audit.list({ target: 'key/ci' })).map((e) => e.action);
      expect(actions).toEqual(['key.create', 'key.revoke', 'key.create']);
    });

    it('refuses a change of a key that sets nothing, and records nothing', async () => {
      await store.keys.create(
        { name: 'lim', role: 'user', prefix: 'p', secretHash: hash('lim'), rpm: 5 },
        'admin',
      );
      for (const limits of [{}, { rpm: undefined }]) {
        const none = await refusal(store.keys.setLimits('lim', limits, 'admin'));
        expect(none.code).toBe('invalid_argument');
        expect(none.message).toBe(
          'nothing to change of key lim: an update sets at least one of allowed_models, rpm, tpm',
        );
      }
      expect((await store.keys.findActiveByName('lim'))?.rpm).toBe(5);
      expect((await store.audit.list({ target: 'key/lim' })).map((e) => e.action)).toEqual(['key.create']);
      const set = await store.keys.setLimits('lim', { tpm: 100, rpm: null }, 'admin');
      expect(set).toMatchObject({ rpm: null, tpm: 100 });
    });

    it('rotates a key secret', async () => {
      await store.keys.create({ name: 'rot', role: 'admin', prefix: 'a', secretHash: hash('old') }, 'system');
      await store.keys.rotate('rot', { prefix: 'b', secretHash: hash('new') }, 'system');
      expect(await store.keys.findActiveByHash(hash('old'))).toBeUndefined();
      expect((await store.keys.findActiveByHash(hash('new')))?.prefix).toBe('b');
    });

    it('pages the audit log newest first and filters it', async () => {
      for (let i = 0; i < 5; i++)
        await store.audit.record({ actor: 'pager', action: 'test.page', target: `t/${i}`, detail: { i } });
      const page1 = await store.audit.list({ actor: 'pager', limit: 2 });
      expect(page1.map((e) => e.detail['i'])).toEqual([4, 3]);
      const page2 = await store.audit.list({ actor: 'pager', limit: 2, before: page1[1]!.id });
      expect(page2.map((e) => e.detail['i'])).toEqual([2, 1]);
      const future = await store.audit.list({ actor: 'pager', since: '2999-01-01T00:00:00.000Z' });
      expect(future).toEqual([]);
    });

    it('makes join tokens, finds them by hash (revoked too), and revokes them', async () => {
      const t = await store.joinTokens.create(
        {
          name: 'rack-1',
          prefix: 'llmgw_join_ab...',
          secretHash: hash('j1'),
          expiresAt: '2999-01-01T00:00:00.000Z',
        },
        'admin',
      );
      expect(t).toMatchObject({
        name: 'rack-1',
        uses: 0,
        revoked_at: null,
        expires_at: '2999-01-01T00:00:00.000Z',
      });
      const dup = await refusal(
        store.joinTokens.create(
          { name: 'rack-1', prefix: 'x', secretHash: hash('j2'), expiresAt: null },
          'admin',
        ),
      );
      expect(dup.message).toBe(
        'a join token named "rack-1" already exists: revoke it first, or pick another name',
      );
      await store.joinTokens.noteUse(t.id, '2026-01-01T00:00:00.000Z');
      expect((await store.joinTokens.findByHash(hash('j1')))?.uses).toBe(1);
      await store.joinTokens.revoke('rack-1', 'admin');
      expect((await store.joinTokens.findByHash(hash('j1')))?.revoked_by).toBe('admin');
      expect(await store.joinTokens.list()).toEqual([]);
      const missing = await refusal(store.joinTokens.revoke('rack-1', 'admin'));
      expect(missing.message).toBe('no live join token is named "rack-1" (llmgw ctl node tokens lists them)');
    });

    it('joins nodes with a live token, refuses a taken name, and removes them', async () => {
      const token = await store.joinTokens.create(
        { name: 'join-nodes', prefix: 'p', secretHash: hash('jn'), expiresAt: null },
        'admin',
      );
      const inventory = {
        host: { hostname: 'gpu-1' },
        gpu: { method: 'none', reasons: [], cards: [] },
        agent_version: '1',
      } as unknown as NodeInventory;
      const node = {
        id: 'id-1',
        name: 'gpu-1',
        joined_with: 'join-nodes',
        address: '10.0.0.1',
        agent_version: '1',
        inventory,
        secretHash: hash('n1'),
        tokenId: token.id,
      };
      const joined = await store.nodes.join(node, '2026-01-01T00:00:00.000Z');
      expect(joined).toMatchObject({ id: 'id-1', name: 'gpu-1', last_seen_at: '2026-01-01T00:00:00.000Z' });
      expect((await store.nodes.findCredential('id-1'))?.secretHash).toBe(hash('n1'));
      const taken = await refusal(store.nodes.join({ ...node, id: 'id-2' }, '2026-01-01T00:00:01.000Z'));
      expect(taken.code).toBe('conflict');
      expect(taken.message).toContain(
        'a node named "gpu-1" has already joined with another identity: remove it first (llmgw ctl node rm gpu-1)',
      );
      // The same node joining again gets a new credential.
      await store.nodes.join({ ...node, secretHash: hash('n2') }, '2026-01-01T00:00:02.000Z');
      expect((await store.nodes.findCredential('id-1'))?.secretHash).toBe(hash('n2'));
      expect((await store.joinTokens.findByHash(hash('jn')))?.uses).toBe(2);
      await store.nodes.touch([{ id: 'id-1', at: '2026-01-02T00:00:00.000Z', address: '10.0.0.9' }]);
      expect(await store.nodes.get('id-1')).toMatchObject({
        last_seen_at: '2026-01-02T00:00:00.000Z',
        address: '10.0.0.9',
      });
      await store.joinTokens.revoke('join-nodes', 'admin');
      const revoked = await refusal(
        store.nodes.join({ ...node, id: 'id-3', name: 'gpu-3' }, '2026-01-03T00:00:00.000Z'),
      );
      expect(revoked.code).toBe('unauthenticated');
      expect(await store.nodes.getByName('gpu-3')).toBeUndefined();
      await store.nodes.remove('gpu-1', 'admin');
      expect(await store.nodes.list()).toEqual([]);
      expect((await store.audit.list({ target: 'node/gpu-1' })).map((e) => e.action)).toEqual([
        'node.remove',
        'node.rejoin',
        'node.join',
      ]);
    });

    it('keeps replicas and their shards, numbers replicas without reuse, and retires them', async () => {
      const [n1, n2] = await store.fleet.nextReplicaNumbers('fleet-model', 2);
      expect([n1, n2]).toEqual([1, 2]);
      expect(await store.fleet.nextReplicaNumbers('fleet-model', 1)).toEqual([3]);
      expect(await store.fleet.nextReplicaNumbers('other-model', 1)).toEqual([1]);
      const replica = {
        id: 'fleet-model-1',
        model: 'fleet-model',
        profile: 'gpu',
        created_at: '2026-01-01T00:00:00.000Z',
        sealed_key: 'v1:sealed',
        spec: spec('fleet-model'),
        retiring: false,
        retire_reason: null,
        retiring_since: null,
      };
      const shards = [0, 1].map((rank) => ({
        replica: replica.id,
        model: 'fleet-model',
        profile: 'gpu',
        rank,
        ranks: 2,
        node: `n${rank}`,
        devices: [rank, 1000 + rank],
        port: 20000 + rank,
        ...(rank === 0 ? { dist_port: 20100 } : {}),
      }));
      await store.fleet.apply({ add: [{ replica, shards }], remove: [] }, 'system');
      expect(await store.fleet.replicas()).toContainEqual(replica);
      expect((await store.fleet.shards()).filter((s) => s.replica === replica.id)).toEqual(shards);
      await store.fleet.retire(replica.id, 'restart', 'admin');
      expect((await store.fleet.replicas()).find((r) => r.id === replica.id)).toMatchObject({
        retiring: true,
        retire_reason: 'restart',
        retiring_since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      const missing = await refusal(store.fleet.retire('nope-1', 'x', 'admin'));
      expect(missing.message).toBe('no replica is named "nope-1" (llmgw ctl replicas lists them)');
      await store.fleet.retire(replica.id, null, 'admin');
      expect((await store.fleet.replicas()).find((r) => r.id === replica.id)).toMatchObject({
        retiring: false,
        retire_reason: null,
        retiring_since: null,
      });
      await store.fleet.locked(async (tx) =>
        tx.fleet.apply({ add: [], remove: [{ id: replica.id, reason: 'scaled down' }] }, 'system'),
      );
      expect((await store.fleet.shards()).filter((s) => s.replica === replica.id)).toEqual([]);
      expect((await store.audit.list({ target: `replica/${replica.id}` })).map((e) => e.action)).toEqual([
        'replica.remove',
        'replica.keep',
        'replica.retire',
        'replica.create',
      ]);
    });

    it("keeps each model's latest rollout, ends it once, and audits its end", async () => {
      const first = {
        model: 'roll-model',
        change: 'gpus 1 → 2',
        mode: 'surge' as const,
        by: 'admin',
        spec: spec('roll-model', { replicas: 2 }),
        replica: null,
        replaces: 2,
        started_at: '2026-01-01T00:00:00.000Z',
      };
      expect(await store.rollouts.get('roll-model')).toBeUndefined();
      await store.rollouts.start(first);
      expect(await store.rollouts.get('roll-model')).toEqual({
        ...first,
        state: 'rolling',
        finished_at: null,
        error: null,
      });
      const failed = {
        state: 'failed' as const,
        error: 'replica roll-model-3: llama-server exited with code 1',
      };
      expect(await store.rollouts.finish('roll-model', first.started_at, failed, 'system')).toBe(true);
      // Ended once: a second end (another control plane's) writes nothing.
      expect(await store.rollouts.finish('roll-model', first.started_at, { state: 'done' }, 'system')).toBe(
        false,
      );
      expect(await store.rollouts.get('roll-model')).toMatchObject({
        state: 'failed',
        finished_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        error: failed.error,
      });
      const [entry] = await store.audit.list({ target: 'model/roll-model' });
      expect(entry).toMatchObject({
        actor: 'system',
        action: 'model.rollout.failed',
        detail: { change: 'gpus 1 → 2', mode: 'surge', by: 'admin', error: failed.error },
      });

      // A later change starts afresh; the end of the older one no longer applies to it.
      const second = {
        ...first,
        change: 'restart of roll-model-1',
        mode: 'in-place' as const,
        replica: 'roll-model-1',
        started_at: '2026-01-01T01:00:00.000Z',
      };
      await store.rollouts.start(second);
      expect(await store.rollouts.finish('roll-model', first.started_at, { state: 'done' }, 'system')).toBe(
        false,
      );
      expect(await store.rollouts.get('roll-model')).toEqual({
        ...second,
        state: 'rolling',
        finished_at: null,
        error: null,
      });
      expect(await store.rollouts.finish('roll-model', second.started_at, { state: 'done' }, 'system')).toBe(
        true,
      );
      expect((await store.rollouts.list()).filter((r) => r.model === 'roll-model')).toEqual([
        expect.objectContaining({ state: 'done', error: null, mode: 'in-place' }),
      ]);
      expect((await store.audit.list({ target: 'model/roll-model' })).map((e) => e.action)).toEqual([
        'model.rollout.done',
        'model.rollout.failed',
      ]);
    });

    it("keeps each autoscaled model's count and last decision, audits a decision, and removes it", async () => {
      expect(await store.scale.get('scale-model')).toBeUndefined();
      const decision = {
        at: '2026-01-01T00:00:00.000Z',
        from: 1,
        to: 3,
        direction: 'up' as const,
        reason: 'load 2.1 over target 0.7',
        figures: { load: 2.1, queued: 4 },
      };
      await store.scale.put(
        { model: 'scale-model', replicas: 3, decision, last_request_at: null, cold_start: null },
        { actor: 'system' },
      );
      expect(await store.scale.get('scale-model')).toEqual({
        model: 'scale-model',
        replicas: 3,
        decision,
        last_request_at: null,
        cold_start: null,
        updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      const [entry] = await store.audit.list({ target: 'model/scale-model' });
      expect(entry).toMatchObject({
        actor: 'system',
        action: 'model.scale',
        detail: { from: 1, to: 3, direction: 'up', figures: { load: 2.1, queued: 4 } },
      });
      // What the gateways saw, written without a decision: replaced, and nothing audited.
      await store.scale.put({
        model: 'scale-model',
        replicas: 3,
        decision,
        last_request_at: '2026-01-01T00:01:00.000Z',
        cold_start: { ms: 1234.6, at: '2026-01-01T00:00:30.000Z' },
      });
      expect(await store.scale.get('scale-model')).toMatchObject({
        last_request_at: '2026-01-01T00:01:00.000Z',
        cold_start: { ms: 1235, at: '2026-01-01T00:00:30.000Z' },
      });
      expect(await store.audit.list({ target: 'model/scale-model' })).toHaveLength(1);
      expect((await store.scale.list()).map((r) => r.model)).toContain('scale-model');
      await store.scale.remove('scale-model');
      expect(await store.scale.get('scale-model')).toBeUndefined();
    });

    it('replaces sealed engine keys, and keeps the first check value of their secret', async () => {
      const replica = {
        id: 'sealed-model-1',
        model: 'sealed-model',
        profile: 'cpu',
        created_at: '2026-01-01T00:00:00.000Z',
        sealed_key: 'llmgw_engine_plain',
        spec: spec('sealed-model'),
        retiring: false,
        retire_reason: null,
        retiring_since: null,
      };
      await store.fleet.apply({ add: [{ replica, shards: [] }], remove: [] }, 'system');
      await store.fleet.locked((tx) => tx.fleet.reseal([{ id: replica.id, sealed_key: 'v1:now-sealed' }]));
      expect((await store.fleet.replicas()).find((r) => r.id === replica.id)?.sealed_key).toBe(
        'v1:now-sealed',
      );
      expect(await store.fleet.keyCheck('first')).toBe('first');
      expect(await store.fleet.locked((tx) => tx.fleet.keyCheck('second'))).toBe('first');
      await store.fleet.apply({ add: [], remove: [{ id: replica.id, reason: 'test' }] }, 'system');
    });

    it('keeps everything across a restart, without migrating again', async () => {
      await store.models.create(spec('durable'), 'alice');
      const second = await h.reopen();
      try {
        expect((await second.models.get('durable'))?.spec.name).toBe('durable');
        expect(await second.origins.get('o-one')).toMatchObject({ model: 'o-one', source: origin.source });
        expect(await second.rollouts.get('roll-model')).toMatchObject({ state: 'done', mode: 'in-place' });
      } finally {
        await second.close();
      }
    });

    it.runIf(options.shared)(
      'lets two control planes on one database update one model without losing a write',
      async () => {
        await store.models.create(spec('shared'), 'alice');
        const other = await h.reopen();
        try {
          const n = 20;
          await Promise.all(
            Array.from({ length: n }, (_, i) =>
              (i % 2 === 0 ? store : other).models.update(
                'shared',
                (m) => ({ ...m.spec, replicas: m.spec.replicas + 1 }),
                { actor: `cp-${i % 2}` },
              ),
            ),
          );
          const final = await store.models.get('shared');
          expect(final?.spec.replicas).toBe(1 + n);
          expect(final?.version).toBe(1 + n);
          expect(
            await store.audit.list({ target: 'model/shared', action: 'model.update', limit: 100 }),
          ).toHaveLength(n);
        } finally {
          await other.close();
        }
      },
    );

    it('grants a lease to one holder at a time, renews it in the same term, and hands it over only once it expired', async () => {
      const a = await store.cluster.claimLease('contract-lease', 'cp-a', 60_000);
      expect(a.held).toBe(true);
      const b = await store.cluster.claimLease('contract-lease', 'cp-b', 60_000);
      expect(b).toMatchObject({ held: false, lease: { holder: 'cp-a', token: a.lease.token } });
      const renewed = await store.cluster.claimLease('contract-lease', 'cp-a', 60_000);
      expect(renewed.held).toBe(true);
      expect(renewed.lease.token).toBe(a.lease.token);
      expect(renewed.lease.since).toBe(a.lease.since);
      await store.cluster.releaseLease('contract-lease', 'cp-a');
      const taken = await store.cluster.claimLease('contract-lease', 'cp-b', 60_000);
      expect(taken).toMatchObject({ held: true, lease: { holder: 'cp-b', token: a.lease.token + 1 } });
      expect(await store.cluster.lease('contract-lease')).toMatchObject({ holder: 'cp-b' });
    });

    it('refuses a fenced write of a holder whose lease was taken over, and writes nothing of it', async () => {
      const a = await store.cluster.claimLease('contract-fence', 'cp-a', 60_000);
      const fence = { lease: 'contract-fence', holder: 'cp-a', token: a.lease.token };
      await store.cluster.checkFence(fence);
      await store.cluster.releaseLease('contract-fence', 'cp-a');
      await store.cluster.claimLease('contract-fence', 'cp-b', 60_000);
      const e = await refusal(
        store.transaction(async (tx) => {
          await tx.models.create(spec('fenced-out'), 'system');
          await tx.cluster.checkFence(fence);
        }),
      );
      expect(e.message).toContain(
        `this control plane (cp-a, term ${a.lease.token}) no longer holds the contract-fence lease: cp-b holds it now (term ${a.lease.token + 1}`,
      );
      expect(await store.models.get('fenced-out')).toBeUndefined();
      const expired = await store.cluster.claimLease('contract-expiring', 'cp-a', 1);
      await new Promise((r) => setTimeout(r, 20));
      const late = await refusal(
        store.cluster.checkFence({ lease: 'contract-expiring', holder: 'cp-a', token: expired.lease.token }),
      );
      expect(late.message).toContain('before this control plane renewed it');
    });

    it("keeps the control planes that serve, and each node's last report", async () => {
      const at = new Date().toISOString();
      await store.cluster.announce({
        id: 'cp-x',
        url: 'https://x:8080',
        version: '1',
        started_at: at,
        seen_at: at,
      });
      await store.cluster.announce({
        id: 'cp-x',
        url: 'https://x:8443',
        version: '2',
        started_at: at,
        seen_at: at,
      });
      expect((await store.cluster.controlPlanes()).filter((c) => c.id === 'cp-x')).toEqual([
        { id: 'cp-x', url: 'https://x:8443', version: '2', started_at: at, seen_at: at },
      ]);
      await store.cluster.forget('cp-x');
      expect((await store.cluster.controlPlanes()).some((c) => c.id === 'cp-x')).toBe(false);
      await store.cluster.putReport({ node: 'n1', by: 'cp-x', at, report: { statuses: [1] } });
      await store.cluster.putReport({ node: 'n1', by: 'cp-y', at, report: { statuses: [2] } });
      expect(await store.cluster.reports()).toContainEqual({
        node: 'n1',
        by: 'cp-y',
        at,
        report: { statuses: [2] },
      });
      await store.cluster.removeReport('n1');
      expect((await store.cluster.reports()).some((r) => r.node === 'n1')).toBe(false);
    });

    it('wakes listeners of a channel, after the transaction that notified commits', async () => {
      const heard: string[] = [];
      const stop = store.cluster.listen('fleet', (p) => heard.push(p));
      try {
        // PostgreSQL's listening connection is opened at the first listen.
        await new Promise((r) => setTimeout(r, 300));
        await store.transaction(async (tx) => {
          await tx.cluster.notify('fleet', 'from-tx');
        });
        await store.cluster.notify('models', 'other-channel');
        const until = Date.now() + 5000;
        while (!heard.includes('from-tx') && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        expect(heard).toEqual(['from-tx']);
      } finally {
        stop();
      }
    });

    it('keeps a shared value: the first put wins, later ones get it back', async () => {
      expect(await store.shared.get('tls/ca')).toBeUndefined();
      expect(await store.shared.putIfAbsent('tls/ca', 'first')).toBe('first');
      expect(await store.shared.putIfAbsent('tls/ca', 'second')).toBe('first');
      expect(await store.shared.get('tls/ca')).toBe('first');
    });

    it.runIf(options.shared)('lets control planes starting together agree on one shared value', async () => {
      const other = await h.reopen();
      try {
        const won = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 === 0 ? store : other).shared.putIfAbsent('race', `cp-${i}`),
          ),
        );
        expect(new Set(won).size).toBe(1);
        expect(await other.shared.get('race')).toBe(won[0]);
      } finally {
        await other.close();
      }
    });

    it('refuses a database written by a newer llmgw, naming the migration', async () => {
      await h.addUnknownMigration('9999_from_the_future');
      const e = await refusal(h.reopen());
      expect(e.code).toBe('unavailable');
      const latest = Object.keys(migrations('sqlite')).sort().at(-1)!;
      expect(e.message).toContain(
        `is newer than this llmgw: it has schema migration 9999_from_the_future, and this build knows up to ${latest}.`,
      );
      expect(e.message).toContain('Upgrade llmgw');
    });
  });
}
