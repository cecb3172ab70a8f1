import type { Authenticator } from '../auth/authenticator.js';
import type { Requester } from '../client/failover-client.js';
import { bearerToken } from '../core/bearer.js';
import { LlmgwError } from '../core/errors.js';
import { hashSecret } from '../core/secrets.js';
import type { KeyInfo } from '../protocol/routes.js';

import { GatewayError } from './openai-errors.js';

/** Who is calling, as the gateway needs it: the key's name, role and what it may use. */
export interface GatewayPrincipal {
  name: string;
  role: KeyInfo['role'];
  allowedModels: string[] | null;
  rpm: number | null;
  tpm: number | null;
}

/** Where keys are looked up: the control plane's store, or the control plane over its API. */
export interface GatewayKeys {
  /** The principal of a key as sent; throws GatewayError invalid_api_key. */
  check(secret: string | undefined): Promise<GatewayPrincipal>;
}

/** The headers a key comes in, as their raw values. */
export interface KeyHeaders {
  authorization?: string | string[] | undefined;
  'x-api-key'?: string | string[] | undefined;
}

/** What a request is for, as far as its key goes: known from the request's head alone, before its body (and model). */
export type KeyScope = '/v1' | '/metrics';

/**
 * The key of a request from its head, checked for what the request is for: the one check
 * the gateway makes, and one that needs no body, so a request without a valid key can be
 * refused before its body is read. Which models the key may use is checked later, once the
 * body names one. Throws GatewayError (401 invalid_api_key, 403 permission_denied).
 */
export async function admitKey(
  keys: GatewayKeys,
  headers: KeyHeaders,
  scope: KeyScope,
): Promise<GatewayPrincipal> {
  const p = await keys.check(secretOf(headers));
  if (scope === '/metrics' && p.role !== 'admin' && p.role !== 'metrics') {
    // /metrics names every key: not for every key to read.
    throw new GatewayError(
      'permission_denied',
      `key "${p.name}" has the ${p.role} role; /metrics needs an admin key or a metrics key (llmgw ctl key create NAME --role metrics)`,
    );
  }
  if (scope === '/v1' && p.role === 'metrics') {
    throw new GatewayError(
      'permission_denied',
      `key "${p.name}" has the metrics role, which reads /metrics only: use a user key for /v1 (llmgw ctl key create NAME)`,
    );
  }
  return p;
}

/** `Authorization: Bearer KEY`, else `X-Api-Key: KEY` (what Anthropic-style clients send). */
export function secretOf(headers: KeyHeaders): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === 'string') return bearerToken(auth);
  const key = headers['x-api-key'];
  return typeof key === 'string' && key.trim() !== '' ? key.trim() : undefined;
}

const noKey =
  'send your API key as "Authorization: Bearer KEY" (an admin makes one with llmgw ctl key create NAME)';

function missing(): GatewayError {
  return new GatewayError('invalid_api_key', `no API key: ${noKey}`);
}

function invalid(): GatewayError {
  return new GatewayError('invalid_api_key', `the API key is not valid (revoked, or mistyped): ${noKey}`);
}

/** Keys checked against the control plane's own store (the gateway inside the control plane). */
export function storeKeys(auth: Authenticator): GatewayKeys {
  // Keys seen in the last second, by the secret as sent: a request then costs no hash and
  // no lookup. A revocation here forgets them at once (the authenticator's generation).
  const recent = new Map<string, { p: GatewayPrincipal; until: number; generation: number }>();
  return {
    async check(secret) {
      if (secret === undefined) throw missing();
      const now = Date.now();
      const hit = recent.get(secret);
      if (hit !== undefined && hit.until > now && hit.generation === auth.generation) return hit.p;
      try {
        const found = await auth.byHash(hashSecret(secret));
        const p = {
          name: found.name,
          role: found.role,
          allowedModels: found.allowedModels,
          rpm: found.rpm,
          tpm: found.tpm,
        };
        if (recent.size > 10_000) recent.clear();
        recent.set(secret, { p, until: now + 1000, generation: auth.generation });
        return p;
      } catch (e) {
        if (e instanceof LlmgwError && e.code === 'unauthenticated') throw invalid();
        throw e;
      }
    },
  };
}

/**
 * Keys checked by asking the control plane, by hash only (a gateway of its own). Answers
 * are kept a while, and kept past that while the control plane does not answer, so the
 * gateway serves known keys alone when it is away.
 */
export function remoteKeys(client: Requester, options: { ttlMs?: number } = {}): GatewayKeys {
  const ttl = options.ttlMs ?? 30_000;
  const cache = new Map<string, { info: KeyInfo | undefined; until: number }>();
  // Anyone may send made-up keys: what is remembered of them stays bounded.
  const remember = (hash: string, entry: { info: KeyInfo | undefined; until: number }, now: number) => {
    if (cache.size >= 10_000)
      for (const [h, e] of cache) if (e.info === undefined || e.until <= now) cache.delete(h);
    if (cache.size >= 10_000) cache.clear();
    cache.set(hash, entry);
  };
  return {
    async check(secret) {
      if (secret === undefined) throw missing();
      const hash = hashSecret(secret);
      const hit = cache.get(hash);
      const now = Date.now();
      let info: KeyInfo | undefined;
      if (hit !== undefined && hit.until > now) info = hit.info;
      else {
        try {
          info = (await client.request<KeyInfo>('POST', '/gateway/keys', { json: { secret_hash: hash } }))
            .body;
          remember(hash, { info, until: now + ttl }, now);
        } catch (e) {
          if (e instanceof LlmgwError && e.code === 'unauthenticated') {
            remember(hash, { info: undefined, until: now + Math.min(ttl, 5000) }, now);
            info = undefined;
          } else if (hit !== undefined) {
            info = hit.info;
          } else {
            throw new GatewayError(
              'no_ready_replica',
              'the control plane does not answer, and this key was not seen before: retry in a moment',
              { retryAfterS: 5 },
            );
          }
        }
      }
      if (info === undefined) throw invalid();
      return {
        name: info.name,
        role: info.role,
        allowedModels: info.allowed_models,
        rpm: info.rpm,
        tpm: info.tpm,
      };
    },
  };
}
