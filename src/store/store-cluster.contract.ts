import { beforeEach, expect, it } from 'vitest';

import { until } from '../../test/support/timing.js';

import { migrations } from './migrations.js';
import type { Store } from './store.js';
import { origin, refusal, spec, type Contract, type StoreHarness } from './store-fixtures.contract.js';

/** The contract's cases for restarts, control planes sharing one database, leases, notifications and shared values; last, as they read what the cases before them wrote. */
export function clusterCases(c: Contract): void {
  let store: Store;
  let h: StoreHarness;
  const { options } = c;
  // Read before each case: the store is opened in the suite's beforeAll, after the cases are declared.
  beforeEach(() => {
    store = c.store;
    h = c.harness;
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
      await until('the notification from the transaction', () => heard.includes('from-tx'), 5000);
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

  it('replaces a shared value only while it is the one read, and says what is stored', async () => {
    await store.shared.putIfAbsent('sealed', 'plain');
    expect(await store.shared.replace('sealed', 'plain', 'sealed-1')).toBe('sealed-1');
    // A second writer that read the old value changes nothing and gets the first one's.
    expect(await store.shared.replace('sealed', 'plain', 'sealed-2')).toBe('sealed-1');
    expect(await store.shared.get('sealed')).toBe('sealed-1');
  });

  it.runIf(options.shared)(
    'lets control planes rewriting one shared value together agree on one',
    async () => {
      await store.shared.putIfAbsent('rewrite', 'old');
      const other = await h.reopen();
      try {
        const won = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 === 0 ? store : other).shared.replace('rewrite', 'old', `cp-${i}`),
          ),
        );
        expect(new Set(won).size).toBe(1);
        expect(await other.shared.get('rewrite')).toBe(won[0]);
      } finally {
        await other.close();
      }
    },
  );

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
}
