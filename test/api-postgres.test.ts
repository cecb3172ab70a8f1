import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { createTempDatabase, type TempDatabase } from './support/postgres.js';

const adminKey = 'test-admin-key-0123456789abcdef';
// Control planes on one database share the secret their engine keys are sealed with.
const env = { LLMGW_ENGINE_KEY_SECRET: 'shared-engine-key-secret-0123456789abcdef' };

describe('two control planes on one PostgreSQL database', () => {
  let db: TempDatabase;
  let a: TestControlPlane;
  let b: TestControlPlane;

  beforeAll(async () => {
    db = await createTempDatabase();
    [a, b] = await Promise.all([
      startControlPlane({ database: db.url, adminKey, env }),
      startControlPlane({ database: db.url, adminKey, env }),
    ]);
  });
  afterAll(async () => {
    await a.stop();
    await b.stop();
    await db.drop();
  });

  it('refuse a third whose engine-key secret is another, saying how to share it', async () => {
    const third = startControlPlane({
      database: db.url,
      adminKey,
      env: { LLMGW_ENGINE_KEY_SECRET: 'another-engine-key-secret-0123456789abcdef' },
    });
    await expect(third).rejects.toThrow(
      "the database's engine keys were sealed with another secret than this control plane's (from LLMGW_ENGINE_KEY_SECRET): give every control plane on one database the same secret: " +
        'set LLMGW_ENGINE_KEY_SECRET to the contents of engine-key.secret in the data dir of the control plane that first used it ' +
        '(if that secret is lost, docs/install.md says how to start over with new engine keys)',
    );
  });

  it('see each other’s changes and keys', async () => {
    const created = await api(a.url, adminKey, 'POST', '/keys', { name: 'shared-user' });
    expect((await api(b.url, created.body.secret, 'GET', '/whoami')).body.name).toBe('shared-user');
    expect((await api(b.url, adminKey, 'GET', '/health')).body.store).toBe('postgres');
  });

  it('lose no write when clients of both update one model at once (read, change, write with If-Match, retry on conflict)', async () => {
    const model = {
      name: 'contended',
      source: '/m.gguf',
      profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
    };
    expect((await api(a.url, adminKey, 'POST', '/models', model)).status).toBe(201);
    const writers = 16;
    let conflicts = 0;
    await Promise.all(
      Array.from({ length: writers }, async (_, i) => {
        const cp = i % 2 === 0 ? a : b;
        for (let attempt = 0; attempt < 200; attempt++) {
          const current = await api(cp.url, adminKey, 'GET', '/models/contended');
          const profile = current.body.profiles[0];
          const next = {
            ...current.body,
            profiles: [{ ...profile, args: [...profile.args, `--writer-${i}`] }],
          };
          const r = await api(cp.url, adminKey, 'PUT', '/models/contended', next, {
            'if-match': current.headers.get('etag')!,
          });
          if (r.status === 200) return;
          expect(r.status).toBe(409);
          conflicts++;
        }
        throw new Error(`writer ${i} never got its change in`);
      }),
    );
    const final = await api(b.url, adminKey, 'GET', '/models/contended');
    expect([...final.body.profiles[0].args].sort()).toEqual(
      Array.from({ length: writers }, (_, i) => `--writer-${i}`).sort(),
    );
    expect(final.body.metadata.version).toBe(writers + 1);
    const audit = await api(
      a.url,
      adminKey,
      'GET',
      '/audit?target=model/contended&action=model.update&limit=100',
    );
    expect(audit.body.items).toHaveLength(writers);
    // The refusals show the race was real, not serialised by the test.
    expect(conflicts).toBeGreaterThan(0);
  });
});
