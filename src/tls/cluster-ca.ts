import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { z } from 'zod';

import { LlmgwError } from '../core/errors.js';

import { createCa, publicKeyHash, type CertificatePair } from './certificates.js';

/** The store's shared values (Store.shared), as this module needs them. */
export interface SharedValues {
  get(key: string): Promise<string | undefined>;
  putIfAbsent(key: string, value: string): Promise<string>;
  /** Replaces the value only while it is still `from`; returns the value stored after. */
  replace(key: string, from: string, to: string): Promise<string>;
}

/**
 * Seals the CA's private key with the secret the control planes share outside the
 * database (EngineKeys: LLMGW_ENGINE_KEY_SECRET or DATA_DIR/engine-key.secret), as engine
 * keys are sealed; `id` is bound in, so a sealed value cannot be moved to another row.
 */
export interface KeySeal {
  /** Where the secret came from (the variable's name, or a file), for messages. */
  readonly source: string;
  seal(id: string, text: string): string;
  /** Throws when this secret does not open it. */
  open(id: string, sealed: string): string;
}

/** Where the CA is kept in the store, shared by every control plane on the database. */
export const caStoreKey = 'tls/ca';

const storedCa = z.object({ cert: z.string(), key: z.string() });

/** DATA_DIR/tls: the CA's certificate (for operators and local clients) and this control plane's serving pair. */
export function tlsDir(dataDir: string): string {
  return join(dataDir, 'tls');
}

/**
 * The cluster's CA: read from the store, or made now and stored unless another control
 * plane stored one first (then that one is used). Its key is stored sealed with the
 * control planes' shared secret, so a copy of the database alone cannot issue
 * certificates; a key stored before it was sealed is sealed now, once. A copy of the
 * certificate goes to DATA_DIR/tls/ca.pem.
 */
export async function clusterCa(o: {
  shared: SharedValues;
  dataDir: string;
  seal: KeySeal;
}): Promise<CertificatePair> {
  const sealed = (ca: CertificatePair) =>
    JSON.stringify({ cert: ca.cert, key: o.seal.seal(caStoreKey, ca.key) });
  let text = (await o.shared.get(caStoreKey)) ?? (await o.shared.putIfAbsent(caStoreKey, sealed(createCa())));
  let stored = parseStored(text);
  if (isPlainKey(stored.key)) {
    // Written before CA keys were sealed. Of control planes starting together on this
    // database, one replaces it; the others read the one it wrote.
    text = await o.shared.replace(caStoreKey, text, sealed(stored));
    stored = parseStored(text);
  }
  const ca = { cert: stored.cert, key: openKey(stored.key, o.seal) };
  const dir = tlsDir(o.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'ca.pem');
  if (readIfThere(file) !== ca.cert) writeFileSync(file, ca.cert, { mode: 0o644 });
  return ca;
}

function parseStored(text: string): CertificatePair {
  try {
    return storedCa.parse(JSON.parse(text));
  } catch (e) {
    throw new LlmgwError(
      'internal',
      `the cluster CA kept in the database (meta key shared/${caStoreKey}) is not readable: restore the database from a backup, or delete that row to make a new CA (every node must then join again)`,
      { cause: e },
    );
  }
}

/** A PEM key as it was stored before keys were sealed (a sealed one is base64url after its prefix). */
function isPlainKey(key: string): boolean {
  return key.trimStart().startsWith('-----BEGIN');
}

function openKey(sealed: string, seal: KeySeal): string {
  try {
    return seal.open(caStoreKey, sealed);
  } catch (e) {
    throw new LlmgwError(
      'invalid_argument',
      `the cluster CA's private key in the database (meta key shared/${caStoreKey}) cannot be opened with the secret from ${seal.source}: ` +
        'every control plane on one database needs the secret it was sealed with: set LLMGW_ENGINE_KEY_SECRET to the contents of engine-key.secret in the data dir of the control plane that first used the database ' +
        '(if that secret is lost, delete that row to make a new CA; every node must then join again)',
      { cause: e },
    );
  }
}

export function readIfThere(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The hash printed in join tokens: `sha256:<hex>`. */
export const caHash = (ca: CertificatePair): string => publicKeyHash(ca.cert);
