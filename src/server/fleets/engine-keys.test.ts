import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { ModelSpec } from '../../catalog/model-spec.js';
import { LlmgwError } from '../../core/errors.js';
import { openSqliteStore } from '../../store/sqlite/sqlite-store.js';

import { EngineKeys, isSealed, loadEngineKeys, prepareEngineKeys } from './engine-keys.js';

const secret = 'a'.repeat(64);
const key = 'llmgw_engine_0123456789abcdefghijklmnopqrstuv';

async function refusal(work: () => unknown): Promise<LlmgwError> {
  try {
    await work();
  } catch (e) {
    if (e instanceof LlmgwError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

describe('EngineKeys', () => {
  it('seals a key so that the sealed text does not hold it, and opens it again', () => {
    const keys = new EngineKeys(secret, 'test');
    const sealed = keys.seal('tiny-1', key);
    expect(isSealed(sealed)).toBe(true);
    expect(sealed).not.toContain(key.slice('llmgw_engine_'.length, 20));
    expect(keys.open('tiny-1', sealed)).toBe(key);
    // A fresh nonce each time.
    expect(keys.seal('tiny-1', key)).not.toBe(sealed);
  });

  it('refuses to open with another secret, or under another replica id, naming the replica and what to do', async () => {
    const sealed = new EngineKeys(secret, 'test').seal('tiny-1', key);
    const other = await refusal(() =>
      new EngineKeys('b'.repeat(64), '/data/engine-key.secret').open('tiny-1', sealed),
    );
    expect(other.message).toMatch(
      /^the engine key of replica tiny-1 cannot be opened with the secret from \/data\/engine-key\.secret \(.+\)$/,
    );
    const moved = await refusal(() => new EngineKeys(secret, 'test').open('tiny-2', sealed));
    expect(moved.message).toContain('the engine key of replica tiny-2 cannot be opened');
  });
});

describe('loadEngineKeys', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-engine-keys-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes a secret on the first start, readable by its owner only, and reads the same one after', () => {
    const first = loadEngineKeys({ dataDir: join(dir, 'data') });
    const path = join(dir, 'data', 'engine-key.secret');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
    expect(first.source).toBe(path);
    const again = loadEngineKeys({ dataDir: join(dir, 'data') });
    expect(again.check).toBe(first.check);
    expect(again.open('m-1', first.seal('m-1', key))).toBe(key);
  });

  it('takes LLMGW_ENGINE_KEY_SECRET over the file, and writes no file then', () => {
    const keys = loadEngineKeys({ dataDir: dir, fromEnv: secret });
    expect(keys.check).toBe(new EngineKeys(secret, 'x').check);
    expect(keys.source).toBe('LLMGW_ENGINE_KEY_SECRET');
    expect(() => statSync(join(dir, 'engine-key.secret'))).toThrow();
  });

  it('refuses a short secret, and a secret file others may read, saying what to do', async () => {
    expect((await refusal(() => loadEngineKeys({ dataDir: dir, fromEnv: 'short' }))).message).toBe(
      'LLMGW_ENGINE_KEY_SECRET must be at least 32 characters without spaces: generate one with "openssl rand -hex 32"',
    );
    const path = join(dir, 'engine-key.secret');
    writeFileSync(path, `${secret}\n`, { mode: 0o644 });
    chmodSync(path, 0o644);
    expect((await refusal(() => loadEngineKeys({ dataDir: dir }))).message).toBe(
      `${path} holds the secret engine keys are sealed with, and others may read it (mode 0644): chmod 600 ${path}`,
    );
    writeFileSync(path, 'tiny\n', { mode: 0o600 });
    chmodSync(path, 0o600);
    expect((await refusal(() => loadEngineKeys({ dataDir: dir }))).message).toBe(
      `${path} must hold a secret of at least 32 characters without spaces: write one with "openssl rand -hex 32 > ${path}"`,
    );
  });
});

describe('prepareEngineKeys', () => {
  const spec: ModelSpec = {
    name: 'tiny',
    source: '/m.gguf',
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
  };
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-engine-keys-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('seals keys stored before they were sealed, as the same keys, and leaves none in the file', async () => {
    const path = join(dir, 'llmgw.db');
    const store = await openSqliteStore({ path });
    const replica = {
      id: 'tiny-1',
      model: 'tiny',
      profile: 'cpu',
      created_at: '2026-01-01T00:00:00.000Z',
      sealed_key: key,
      spec,
      retiring: false,
      retire_reason: null,
      retiring_since: null,
    };
    await store.fleet.apply({ add: [{ replica, shards: [] }], remove: [] }, 'system');
    const keys = new EngineKeys(secret, 'test');
    await prepareEngineKeys(store, keys);
    const [stored] = await store.fleet.replicas();
    expect(isSealed(stored?.sealed_key ?? '')).toBe(true);
    expect(keys.open('tiny-1', stored?.sealed_key ?? '')).toBe(key);
    // Again: nothing left to seal, the same check.
    await prepareEngineKeys(store, keys);
    expect((await store.fleet.replicas())[0]?.sealed_key).toBe(stored?.sealed_key);
    await store.close();
    expect(readFileSync(path).includes(Buffer.from(key))).toBe(false);
  });

  it('refuses a control plane whose secret is not the one the database was set up with', async () => {
    const store = await openSqliteStore({ path: join(dir, 'llmgw.db') });
    try {
      await prepareEngineKeys(store, new EngineKeys(secret, 'test'));
      const e = await refusal(() =>
        prepareEngineKeys(store, new EngineKeys('b'.repeat(64), '/srv/b/engine-key.secret')),
      );
      expect(e.message).toBe(
        "the database's engine keys were sealed with another secret than this control plane's (from /srv/b/engine-key.secret): " +
          'give every control plane on one database the same secret: set LLMGW_ENGINE_KEY_SECRET to the contents of engine-key.secret in the data dir of the control plane that first used it ' +
          '(if that secret is lost, docs/install.md says how to start over with new engine keys)',
      );
    } finally {
      await store.close();
    }
  });
});
