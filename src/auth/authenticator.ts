import { bearerToken } from '../core/bearer.js';
import { LlmgwError } from '../core/errors.js';
import { hashSecret } from '../core/secrets.js';
import type { ApiKeyRecord, Role, Store } from '../store/store.js';

export interface Principal {
  keyId: string;
  name: string;
  role: Role;
  /** Models it may use through the gateway; null: all. */
  allowedModels: string[] | null;
  rpm: number | null;
  tpm: number | null;
}

export interface AuthenticatorOptions {
  store: Store;
  /**
   * How long a key found is trusted without asking the store again. A revocation on
   * this control plane takes effect at once; one made on another control plane
   * sharing the database, within this time.
   */
  cacheMs?: number;
  now?: () => number;
}

/** Checks bearer keys against the store; a key's secret is only ever compared as a hash. */
export class Authenticator {
  readonly #store: Store;
  readonly #cacheMs: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { principal: Principal; until: number }>();
  readonly #touched = new Map<string, number>();
  #generation = 0;

  constructor(options: AuthenticatorOptions) {
    this.#store = options.store;
    this.#cacheMs = options.cacheMs ?? 5_000;
    this.#now = options.now ?? Date.now;
  }

  /** The principal of an `Authorization` header, or a 401 that says what to send. */
  async authenticate(header: string | undefined): Promise<Principal> {
    const secret = bearerToken(header);
    if (secret === undefined) {
      throw new LlmgwError(
        'unauthenticated',
        'this route needs an API key: send the header "Authorization: Bearer KEY" (llmgw ctl login saves one)',
      );
    }
    return this.byHash(hashSecret(secret));
  }

  /** The principal of a key's hash (a gateway of its own sends the hash, never the key). */
  async byHash(hash: string): Promise<Principal> {
    const now = this.#now();
    const cached = this.#cache.get(hash);
    if (cached !== undefined && cached.until > now) return cached.principal;
    const key = await this.#store.keys.findActiveByHash(hash);
    if (key === undefined) {
      this.#cache.delete(hash);
      throw new LlmgwError(
        'unauthenticated',
        'the API key is not valid: it was revoked, or mistyped (an admin can make one with llmgw ctl key create)',
      );
    }
    const principal = toPrincipal(key);
    this.#cache.set(hash, { principal, until: now + this.#cacheMs });
    this.#noteUse(key.id, now);
    return principal;
  }

  /** Forgets cached keys, after a revocation or rotation here. */
  forget(): void {
    this.#cache.clear();
    this.#generation++;
  }

  /** Changes whenever cached keys are forgotten: caches built on this one check it. */
  get generation(): number {
    return this.#generation;
  }

  // last_used_at is for people ("is this key still used?"): once a minute is plenty,
  // and keeps the store off the hot path.
  #noteUse(id: string, now: number): void {
    const last = this.#touched.get(id) ?? 0;
    if (now - last < 60_000) return;
    this.#touched.set(id, now);
    this.#store.keys.touch(id, new Date(now).toISOString()).catch(() => undefined);
  }
}

export function requireRole(principal: Principal, role: Role): void {
  if (role === 'admin' && principal.role !== 'admin') {
    throw new LlmgwError(
      'permission_denied',
      `this needs an admin key; key "${principal.name}" has the ${principal.role} role`,
    );
  }
}

function toPrincipal(key: ApiKeyRecord): Principal {
  return {
    keyId: key.id,
    name: key.name,
    role: key.role,
    allowedModels: key.allowed_models,
    rpm: key.rpm,
    tpm: key.tpm,
  };
}
