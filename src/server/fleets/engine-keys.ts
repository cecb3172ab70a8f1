import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { LlmgwError, messageOf } from '../../core/errors.js';
import type { Store } from '../../store/store.js';

/** The file under the data dir that holds the secret, unless LLMGW_ENGINE_KEY_SECRET gives it. */
export const engineKeySecretFile = 'engine-key.secret';
export const engineKeySecretVariable = 'LLMGW_ENGINE_KEY_SECRET';

const sealedPrefix = 'v1:';
const ivBytes = 12;
const tagBytes = 16;

/**
 * Engines' API keys as the store keeps them: sealed (AES-256-GCM, the replica's id bound
 * in as associated data) with a key derived from a secret kept outside the database, so a
 * copy of the database alone does not reveal them. The gateway needs the keys themselves,
 * so a one-way hash would not do.
 */
export class EngineKeys {
  readonly #key: Buffer;
  /** Stored in the database: tells whether a control plane holds the secret it was set up with. */
  readonly check: string;
  /** Where the secret came from, for messages. */
  readonly source: string;

  constructor(secret: string, source: string) {
    this.#key = createHmac('sha256', secret).update('llmgw engine key sealing').digest();
    this.check = createHmac('sha256', secret).update('llmgw engine key check').digest('hex');
    this.source = source;
  }

  seal(replica: string, key: string): string {
    const iv = randomBytes(ivBytes);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv).setAAD(Buffer.from(replica, 'utf8'));
    const body = Buffer.concat([cipher.update(key, 'utf8'), cipher.final()]);
    return `${sealedPrefix}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
  }

  open(replica: string, sealed: string): string {
    try {
      if (!isSealed(sealed)) throw new Error('not sealed');
      const raw = Buffer.from(sealed.slice(sealedPrefix.length), 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, ivBytes)).setAAD(
        Buffer.from(replica, 'utf8'),
      );
      decipher.setAuthTag(raw.subarray(ivBytes, ivBytes + tagBytes));
      return Buffer.concat([decipher.update(raw.subarray(ivBytes + tagBytes)), decipher.final()]).toString(
        'utf8',
      );
    } catch (e) {
      throw new LlmgwError(
        'unavailable',
        `the engine key of replica ${replica} cannot be opened with the secret from ${this.source} (${messageOf(e)})`,
        { cause: e },
      );
    }
  }
}

/** Keys written before they were sealed (store migration 0005) are the key itself. */
export function isSealed(stored: string): boolean {
  return stored.startsWith(sealedPrefix);
}

/**
 * The secret engine keys are sealed with: LLMGW_ENGINE_KEY_SECRET when set (what several
 * control planes on one PostgreSQL database share), else DATA_DIR/engine-key.secret,
 * made on the first start, readable by its owner only.
 */
export function loadEngineKeys(o: {
  dataDir: string;
  fromEnv?: string | undefined;
  /** Where fromEnv came from, when not the environment (a Kubernetes Secret). */
  source?: string;
}): EngineKeys {
  if (o.fromEnv !== undefined && o.fromEnv !== '') {
    if (!strongEnough(o.fromEnv)) {
      throw new LlmgwError(
        'invalid_argument',
        `${o.source ?? engineKeySecretVariable} must be at least 32 characters without spaces: generate one with "openssl rand -hex 32"`,
      );
    }
    return new EngineKeys(o.fromEnv, o.source ?? engineKeySecretVariable);
  }
  const path = join(o.dataDir, engineKeySecretFile);
  createOnce(path);
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new LlmgwError(
      'invalid_argument',
      `${path} holds the secret engine keys are sealed with, and others may read it (mode ${mode.toString(8).padStart(4, '0')}): chmod 600 ${path}`,
    );
  }
  const secret = readFileSync(path, 'utf8').trim();
  if (!strongEnough(secret)) {
    throw new LlmgwError(
      'invalid_argument',
      `${path} must hold a secret of at least 32 characters without spaces: write one with "openssl rand -hex 32 > ${path}"`,
    );
  }
  return new EngineKeys(secret, path);
}

function strongEnough(secret: string): boolean {
  return secret.length >= 32 && !/\s/.test(secret);
}

/** Writes a new secret unless one is there: all of it appears at once (a link), or none. */
function createOnce(path: string): void {
  mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(tmp, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(tmp, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Readies a store for these keys, in one locked transaction: the first control plane on a
 * database records its secret's check value, and any later one with another secret is
 * refused (its keys would not open, and its agents would restart every engine with keys
 * the gateway does not know); keys stored before they were sealed are sealed now, the
 * same keys, so no engine restarts.
 */
export async function prepareEngineKeys(store: Store, keys: EngineKeys): Promise<void> {
  await store.fleet.locked(async (tx) => {
    const check = await tx.fleet.keyCheck(keys.check);
    if (check !== keys.check) {
      throw new LlmgwError(
        'invalid_argument',
        `the database's engine keys were sealed with another secret than this control plane's (from ${keys.source}): ` +
          `give every control plane on one database the same secret: set ${engineKeySecretVariable} to the contents of ${engineKeySecretFile} in the data dir of the control plane that first used it ` +
          '(if that secret is lost, docs/install.md says how to start over with new engine keys)',
      );
    }
    const plain = (await tx.fleet.replicas()).filter((r) => !isSealed(r.sealed_key));
    if (plain.length > 0)
      await tx.fleet.reseal(plain.map((r) => ({ id: r.id, sealed_key: keys.seal(r.id, r.sealed_key) })));
  });
}
