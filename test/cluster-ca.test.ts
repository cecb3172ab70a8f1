import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { LlmgwError } from '../src/core/errors.js';
import { EngineKeys } from '../src/server/fleets/engine-keys.js';
import { openPostgresStore } from '../src/store/postgres/postgres-store.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { Store } from '../src/store/store.js';
import { createCa, issueCertificate } from '../src/tls/certificates.js';
import { caStoreKey, clusterCa } from '../src/tls/cluster-ca.js';

import { createTempDatabase, type TempDatabase } from './support/postgres.js';

// The cluster CA's private key at rest, on both stores: sealed with the control planes'
// shared secret (as engine keys are), an unsealed one from an older llmgw sealed on start.

const secret = 'c'.repeat(64);
const keys = new EngineKeys(secret, 'LLMGW_ENGINE_KEY_SECRET');

interface Backend {
  /** A store on a fresh database. */
  fresh: () => Promise<Store>;
  /** Another connection to the last fresh database: a second control plane. */
  again: () => Promise<Store>;
  cleanup: () => Promise<void>;
  /** Several control planes at once on one database: PostgreSQL only (SQLite serves one). */
  shared: boolean;
}

function sqlite(): Backend {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-ca-sqlite-'));
  let n = 0;
  return {
    fresh: () => openSqliteStore({ path: join(dir, `db-${++n}.sqlite`) }),
    again: () => openSqliteStore({ path: join(dir, `db-${n}.sqlite`) }),
    cleanup: () => {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
    shared: false,
  };
}

function postgres(): Backend {
  const temps: TempDatabase[] = [];
  return {
    fresh: async () => {
      const t = await createTempDatabase();
      temps.push(t);
      return openPostgresStore({ url: t.url });
    },
    again: () => openPostgresStore({ url: temps.at(-1)?.url ?? '' }),
    cleanup: async () => {
      for (const t of temps) await t.drop();
    },
    shared: true,
  };
}

async function refusal(work: Promise<unknown>): Promise<LlmgwError> {
  try {
    await work;
  } catch (e) {
    if (e instanceof LlmgwError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

/** The CA signs: a certificate it issues verifies against its certificate. */
function signs(ca: { cert: string; key: string }): boolean {
  const leaf = issueCertificate(ca, { commonName: 'node-1', dnsNames: ['node-1.test'] });
  return new X509Certificate(leaf.cert).verify(new X509Certificate(ca.cert).publicKey);
}

describe.each([
  ['SQLite', sqlite],
  ['PostgreSQL', postgres],
] as const)('the cluster CA in %s', (_name, backend) => {
  let b: Backend;
  const open: Store[] = [];
  const dataDir = () => mkdtempSync(join(tmpdir(), 'llmgw-ca-data-'));
  const store = async (again = false) => {
    const s = again ? await b.again() : await b.fresh();
    open.push(s);
    return s;
  };

  beforeAll(() => {
    b = backend();
  });
  afterAll(async () => {
    for (const s of open) await s.close();
    await b.cleanup();
  });

  it('is stored with its private key sealed, and still signs', async () => {
    const s = await store();
    const ca = await clusterCa({ shared: s.shared, seal: keys, dataDir: dataDir() });
    const raw = (await s.shared.get(caStoreKey)) ?? '';
    const stored = JSON.parse(raw) as { cert: string; key: string };
    expect(stored.cert).toBe(ca.cert);
    expect(stored.key).not.toContain('-----BEGIN');
    expect(raw).not.toContain('PRIVATE KEY');
    expect(raw).not.toContain(ca.key.split('\n')[1]);
    expect(ca.key).toContain('-----BEGIN PRIVATE KEY-----');
    expect(signs(ca)).toBe(true);
    // Another control plane on the database, with the same secret, gets the same CA.
    const other = await store(true);
    const same = await clusterCa({ shared: other.shared, seal: keys, dataDir: dataDir() });
    expect(same).toEqual(ca);
  });

  it('seals the plain key an older llmgw stored, once, on start (control planes starting together on PostgreSQL)', async () => {
    const s = await store();
    const old = createCa();
    const plain = JSON.stringify(old);
    await s.shared.putIfAbsent(caStoreKey, plain);
    const other = await store(true);
    const start = (on: Store) => clusterCa({ shared: on.shared, seal: keys, dataDir: dataDir() });
    const [a, c] = b.shared
      ? await Promise.all([start(s), start(other)])
      : [await start(s), await start(other)];
    // The same CA as before (nodes need not join again), its key no longer readable in the row.
    expect(a).toEqual(old);
    expect(c).toEqual(old);
    const sealed = (await s.shared.get(caStoreKey)) ?? '';
    expect(sealed).not.toBe(plain);
    expect((JSON.parse(sealed) as { key: string }).key).not.toContain('-----BEGIN');
    expect(signs(a)).toBe(true);
    // Once: a later start leaves the sealed row as it is.
    await clusterCa({ shared: s.shared, seal: keys, dataDir: dataDir() });
    expect(await s.shared.get(caStoreKey)).toBe(sealed);
  });

  it('refuses a secret that does not open the key, naming the secret and what to do', async () => {
    const s = await store();
    await clusterCa({ shared: s.shared, seal: keys, dataDir: dataDir() });
    const before = await s.shared.get(caStoreKey);
    const wrong = new EngineKeys('d'.repeat(64), '/srv/cp-2/engine-key.secret');
    const e = await refusal(clusterCa({ shared: s.shared, seal: wrong, dataDir: dataDir() }));
    expect(e.code).toBe('invalid_argument');
    expect(e.message).toBe(
      "the cluster CA's private key in the database (meta key shared/tls/ca) cannot be opened with the secret from /srv/cp-2/engine-key.secret: " +
        'every control plane on one database needs the secret it was sealed with: set LLMGW_ENGINE_KEY_SECRET to the contents of engine-key.secret in the data dir of the control plane that first used the database ' +
        '(if that secret is lost, delete that row to make a new CA; every node must then join again)',
    );
    // Refused without a change to the row.
    expect(await s.shared.get(caStoreKey)).toBe(before);
  });
});
