import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { z } from 'zod';

import { LlmgwError } from '../core/errors.js';

import { createCa, publicKeyHash, type CertificatePair } from './certificates.js';

/** The store's shared values (Store.shared), as this module needs them. */
export interface SharedValues {
  get(key: string): Promise<string | undefined>;
  putIfAbsent(key: string, value: string): Promise<string>;
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
 * plane stored one first (then that one is used). Its key is in the database like every
 * other secret the control planes share: the database must be protected accordingly.
 * A copy of the certificate goes to DATA_DIR/tls/ca.pem.
 */
export async function clusterCa(o: { shared: SharedValues; dataDir: string }): Promise<CertificatePair> {
  const stored = await o.shared.get(caStoreKey);
  const text = stored ?? (await o.shared.putIfAbsent(caStoreKey, JSON.stringify(createCa())));
  let ca: CertificatePair;
  try {
    ca = storedCa.parse(JSON.parse(text));
  } catch (e) {
    throw new LlmgwError(
      'internal',
      `the cluster CA kept in the database (meta key shared/${caStoreKey}) is not readable: restore the database from a backup, or delete that row to make a new CA (every node must then join again)`,
      { cause: e },
    );
  }
  const dir = tlsDir(o.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'ca.pem');
  if (readIfThere(file) !== ca.cert) writeFileSync(file, ca.cert, { mode: 0o644 });
  return ca;
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
