import type { Logger } from 'pino';

import type { Authenticator } from '../auth/authenticator.js';
import type { ApiClient } from '../client/api-client.js';
import type { Settings } from '../config/load.js';
import { LlmgwError } from '../core/errors.js';
import { hashSecret } from '../core/secrets.js';
import { nodeRequest } from '../gateway/client-io.js';
import { Gateway, type GatewayKeys, type GatewayPrincipal } from '../gateway/gateway.js';
import { GatewayError } from '../gateway/openai-errors.js';
import type { UsageSink } from '../gateway/usage-recorder.js';
import type { KeyInfo, RouteTable } from '../protocol/routes.js';
import type { HttpServer } from '../server/http-server.js';

export function gatewayOptions(settings: Settings): { maxBodyBytes: number; retries: number; queue: { maxPerModel: number; timeoutMs: number } } {
  const g = settings.gateway;
  return { maxBodyBytes: Math.round(g.max_body_mb * 1024 * 1024), retries: g.retries, queue: { maxPerModel: g.queue.max_per_model, timeoutMs: Math.round(g.queue.timeout_s * 1000) } };
}

const noKey = 'send your API key as "Authorization: Bearer KEY" (an admin makes one with llmgw ctl key create NAME)';

/** Keys checked against the control plane's own store (the gateway inside the control plane). */
export function storeKeys(auth: Authenticator): GatewayKeys {
  // Keys seen in the last second, by the secret as sent: a request then costs no hash and
  // no lookup. A revocation here forgets them at once (the authenticator's generation).
  const recent = new Map<string, { p: GatewayPrincipal; until: number; generation: number }>();
  return {
    async check(secret) {
      if (secret === undefined) throw new GatewayError('invalid_api_key', `no API key: ${noKey}`);
      const now = Date.now();
      const hit = recent.get(secret);
      if (hit !== undefined && hit.until > now && hit.generation === auth.generation) return hit.p;
      try {
        const found = await auth.byHash(hashSecret(secret));
        const p = { name: found.name, allowedModels: found.allowedModels, rpm: found.rpm, tpm: found.tpm };
        if (recent.size > 10_000) recent.clear();
        recent.set(secret, { p, until: now + 1000, generation: auth.generation });
        return p;
      } catch (e) {
        if (e instanceof LlmgwError && e.code === 'unauthenticated') throw new GatewayError('invalid_api_key', `the API key is not valid (revoked, or mistyped): ${noKey}`);
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
export function remoteKeys(client: ApiClient, options: { ttlMs?: number } = {}): GatewayKeys {
  const ttl = options.ttlMs ?? 30_000;
  const cache = new Map<string, { info: KeyInfo | undefined; until: number }>();
  return {
    async check(secret) {
      if (secret === undefined) throw new GatewayError('invalid_api_key', `no API key: ${noKey}`);
      const hash = hashSecret(secret);
      const hit = cache.get(hash);
      const now = Date.now();
      let info: KeyInfo | undefined;
      if (hit !== undefined && hit.until > now) info = hit.info;
      else {
        try {
          info = (await client.request<KeyInfo>('POST', '/gateway/keys', { json: { secret_hash: hash } })).body;
          cache.set(hash, { info, until: now + ttl });
        } catch (e) {
          if (e instanceof LlmgwError && e.code === 'unauthenticated') {
            cache.set(hash, { info: undefined, until: now + Math.min(ttl, 5000) });
            info = undefined;
          } else if (hit !== undefined) {
            info = hit.info;
          } else {
            throw new GatewayError('no_ready_replica', 'the control plane does not answer, and this key was not seen before: retry in a moment', { retryAfterS: 5 });
          }
        }
      }
      if (info === undefined) throw new GatewayError('invalid_api_key', `the API key is not valid (revoked, or mistyped): ${noKey}`);
      return principal(info);
    },
  };
}

function principal(info: KeyInfo): GatewayPrincipal {
  return { name: info.name, allowedModels: info.allowed_models, rpm: info.rpm, tpm: info.tpm };
}

export function remoteRoutes(client: ApiClient): () => Promise<RouteTable> {
  return async () => (await client.request<RouteTable>('GET', '/gateway/routes')).body;
}

export function remoteUsage(client: ApiClient): UsageSink {
  return async (rows) => {
    await client.request('POST', '/gateway/usage', { json: { rows } });
  };
}

export function newGateway(o: { keys: GatewayKeys; routes: () => Promise<RouteTable>; usage: UsageSink; logger: Logger; settings: Settings }): Gateway {
  return new Gateway({ keys: o.keys, routes: o.routes, usage: o.usage, logger: o.logger, ...gatewayOptions(o.settings) });
}

/** Where the gateway is served: a control plane's address, or a gateway's own. */
export type GatewayHost = Pick<HttpServer, 'fastLane' | 'mount'>;

/** /v1 on the front door's fast path (node:http for what it leaves), and /metrics. */
export function mountGateway(host: GatewayHost, gateway: Gateway): void {
  host.fastLane('/v1/', {
    maxBodyBytes: gateway.maxBodyBytes,
    handler: (req, res) => gateway.handle(req, res),
    fallback: (req, res) => gateway.handle(nodeRequest(req), res),
  });
  host.mount('/metrics', (req, res) => void gateway.metricsHandler(nodeRequest(req), res));
}
