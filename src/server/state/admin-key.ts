import { LlmgwError } from '../../core/errors.js';
import { generateSecret, hashSecret, secretPrefix } from '../../core/secrets.js';
import type { Store } from '../../store/store.js';

export const adminKeyName = 'admin';
/** The actor of changes the control plane makes itself. */
export const systemActor = 'system';

/**
 * Makes sure an admin key exists at start. With LLMGW_ADMIN_KEY set, the key named
 * "admin" takes that secret (created, or rotated when the variable changed). Without
 * it, a first start with no admin key generates one and returns it, to be shown once.
 */
export async function ensureAdminKey(
  store: Store,
  fromEnv: string | undefined,
): Promise<{ generated?: string }> {
  if (fromEnv !== undefined && fromEnv !== '') {
    if (fromEnv.length < 24 || /\s/.test(fromEnv)) {
      throw new LlmgwError(
        'invalid_argument',
        'LLMGW_ADMIN_KEY must be at least 24 characters without spaces: generate one with "openssl rand -hex 24"',
      );
    }
    const hash = hashSecret(fromEnv);
    const existing = await store.keys.findActiveByName(adminKeyName);
    if (existing === undefined) {
      await createIgnoringRace(store, {
        name: adminKeyName,
        role: 'admin',
        prefix: secretPrefix(fromEnv),
        secretHash: hash,
      });
    } else if ((await store.keys.findActiveByHash(hash))?.id !== existing.id) {
      await store.keys.rotate(adminKeyName, { prefix: secretPrefix(fromEnv), secretHash: hash }, systemActor);
    }
    return {};
  }
  const admins = (await store.keys.list()).filter((k) => k.role === 'admin');
  if (admins.length > 0) return {};
  const secret = generateSecret('key');
  const created = await createIgnoringRace(store, {
    name: adminKeyName,
    role: 'admin',
    prefix: secretPrefix(secret),
    secretHash: hashSecret(secret),
  });
  return created ? { generated: secret } : {};
}

// Two control planes starting together on one database: the second one's insert loses.
async function createIgnoringRace(
  store: Store,
  key: Parameters<Store['keys']['create']>[0],
): Promise<boolean> {
  try {
    await store.keys.create(key, systemActor);
    return true;
  } catch (e) {
    if (e instanceof LlmgwError && e.code === 'conflict') return false;
    throw e;
  }
}
