import { beforeEach, expect, it } from 'vitest';

import { LlmgwError } from '../core/errors.js';

import type { Store } from './store.js';
import { hash, origin, record, refusal, spec, type Contract } from './store-fixtures.contract.js';

/** The contract's cases for models, their origins, API keys and the audit log. */
export function modelCases(c: Contract): void {
  let store: Store;
  // Read before each case: the store is opened in the suite's beforeAll, after the cases are declared.
  beforeEach(() => {
    store = c.store;
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
}
