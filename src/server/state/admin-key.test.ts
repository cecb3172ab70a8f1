import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { hashSecret } from '../../core/secrets.js';
import { openSqliteStore } from '../../store/sqlite/sqlite-store.js';
import type { Store } from '../../store/store.js';

import { ensureAdminKey } from './admin-key.js';

describe('the admin key at start', () => {
  let store: Store;
  const open = async () =>
    (store = await openSqliteStore({ path: join(mkdtempSync(join(tmpdir(), 'llmgw-admin-')), 'db') }));
  afterEach(async () => store.close());

  it('generates one on the first start only, and keeps only its hash', async () => {
    await open();
    const first = await ensureAdminKey(store, undefined);
    expect(first.generated).toMatch(/^llmgw_key_\w{32}$/);
    expect((await store.keys.findActiveByHash(hashSecret(first.generated!)))?.role).toBe('admin');
    expect(await ensureAdminKey(store, undefined)).toEqual({});
  });

  it('takes LLMGW_ADMIN_KEY, and follows it when it changes', async () => {
    await open();
    const a = 'a'.repeat(32);
    const b = 'b'.repeat(32);
    expect(await ensureAdminKey(store, a)).toEqual({});
    expect((await store.keys.findActiveByHash(hashSecret(a)))?.name).toBe('admin');
    await ensureAdminKey(store, b);
    expect(await store.keys.findActiveByHash(hashSecret(a))).toBeUndefined();
    expect((await store.keys.findActiveByHash(hashSecret(b)))?.name).toBe('admin');
    expect((await store.audit.list({ action: 'key.rotate' }))[0]?.actor).toBe('system');
  });

  it('refuses a short LLMGW_ADMIN_KEY, saying how to make a good one', async () => {
    await open();
    await expect(ensureAdminKey(store, 'secret')).rejects.toThrow(
      'LLMGW_ADMIN_KEY must be at least 24 characters without spaces: generate one with "openssl rand -hex 24"',
    );
    expect(await store.keys.list()).toEqual([]);
  });
});
