import { beforeEach, expect, it } from 'vitest';

import type { NodeInventory } from '../gpu/types.js';

import type { Store } from './store.js';
import { hash, refusal, spec, type Contract } from './store-fixtures.contract.js';

/** The contract's cases for join tokens, nodes, replicas, rollouts, autoscaling and sealed engine keys. */
export function fleetCases(c: Contract): void {
  let store: Store;
  // Read before each case: the store is opened in the suite's beforeAll, after the cases are declared.
  beforeEach(() => {
    store = c.store;
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
      profiles: { a100: 1, cpu: 1 },
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
    expect((await store.fleet.replicas()).find((r) => r.id === replica.id)?.sealed_key).toBe('v1:now-sealed');
    expect(await store.fleet.keyCheck('first')).toBe('first');
    expect(await store.fleet.locked((tx) => tx.fleet.keyCheck('second'))).toBe('first');
    await store.fleet.apply({ add: [], remove: [{ id: replica.id, reason: 'test' }] }, 'system');
  });
}
