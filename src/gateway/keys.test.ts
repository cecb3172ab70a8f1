import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

import { Gateway } from './gateway.js';
import {
  admitKey,
  secretOf,
  type GatewayKeys,
  type GatewayPrincipal,
  type KeyHeaders,
  type KeyScope,
} from './keys.js';
import { GatewayError } from './openai-errors.js';

const principals: Record<string, GatewayPrincipal> = {
  'k-admin': { name: 'root', role: 'admin', allowedModels: null, rpm: null, tpm: null },
  'k-user': { name: 'team-a', role: 'user', allowedModels: ['tiny'], rpm: null, tpm: null },
  'k-gateway': { name: 'edge', role: 'gateway', allowedModels: null, rpm: null, tpm: null },
  'k-metrics': { name: 'prom', role: 'metrics', allowedModels: null, rpm: null, tpm: null },
};

/** Keys by secret, as the store would find them. */
const keys: GatewayKeys = {
  check(secret) {
    if (secret === undefined) return Promise.reject(new GatewayError('invalid_api_key', 'no API key'));
    const p = principals[secret];
    return p === undefined
      ? Promise.reject(new GatewayError('invalid_api_key', 'not valid'))
      : Promise.resolve(p);
  },
};

describe('the gateway’s key check, from the request head', () => {
  it('reads the key from Authorization: Bearer, else X-Api-Key', () => {
    const cases: [KeyHeaders, string | undefined][] = [
      [{ authorization: 'Bearer k-user' }, 'k-user'],
      [{ authorization: 'bearer   k-user  ' }, 'k-user'],
      [{ 'x-api-key': 'k-user' }, 'k-user'],
      [{ 'x-api-key': ' k-user ' }, 'k-user'],
      // A header of another scheme is no key, and X-Api-Key does not stand in for it.
      [{ authorization: 'Basic abc', 'x-api-key': 'k-user' }, undefined],
      [{ authorization: 'Bearer k-admin', 'x-api-key': 'k-user' }, 'k-admin'],
      [{ 'x-api-key': '' }, undefined],
      [{ 'x-api-key': ['a', 'b'] }, undefined],
      [{}, undefined],
    ];
    for (const [headers, secret] of cases)
      expect({ headers, secret: secretOf(headers) }).toEqual({ headers, secret });
  });

  it('lets each role where it may go, and says what to use where it may not', async () => {
    const table: [string, KeyScope, string | undefined][] = [
      ['k-admin', '/v1', undefined],
      ['k-admin', '/metrics', undefined],
      ['k-user', '/v1', undefined],
      [
        'k-user',
        '/metrics',
        'key "team-a" has the user role; /metrics needs an admin key or a metrics key (llmgw ctl key create NAME --role metrics)',
      ],
      ['k-gateway', '/v1', undefined],
      [
        'k-gateway',
        '/metrics',
        'key "edge" has the gateway role; /metrics needs an admin key or a metrics key (llmgw ctl key create NAME --role metrics)',
      ],
      ['k-metrics', '/metrics', undefined],
      [
        'k-metrics',
        '/v1',
        'key "prom" has the metrics role, which reads /metrics only: use a user key for /v1 (llmgw ctl key create NAME)',
      ],
    ];
    for (const [secret, scope, refusal] of table) {
      const got = await admitKey(keys, { authorization: `Bearer ${secret}` }, scope).then(
        (p) => ({ ok: p.name }),
        (e: unknown) => ({
          code: (e as GatewayError).code,
          status: (e as GatewayError).status,
          message: (e as Error).message,
        }),
      );
      if (refusal === undefined)
        expect({ secret, scope, got }).toEqual({ secret, scope, got: { ok: principals[secret]?.name } });
      else
        expect({ secret, scope, got }).toEqual({
          secret,
          scope,
          got: { code: 'permission_denied', status: 403, message: refusal },
        });
    }
  });

  it('refuses a missing or unknown key before anything else', async () => {
    await expect(admitKey(keys, {}, '/v1')).rejects.toMatchObject({
      code: 'invalid_api_key',
      message: 'no API key',
    });
    await expect(admitKey(keys, { authorization: 'Bearer nope' }, '/metrics')).rejects.toMatchObject({
      code: 'invalid_api_key',
      message: 'not valid',
    });
  });
});

describe('the gateway’s key check from the head', () => {
  it('checks a key without a body, and refuses a key of another role with what to use instead', async () => {
    const gateway = new Gateway({
      keys,
      routes: { routeTable: () => Promise.resolve({ replicas: [], models: [] }) },
      usage: { write: () => Promise.resolve() },
      logger: pino({ level: 'silent' }),
    });
    try {
      await expect(gateway.checkKey({ 'x-api-key': 'k-user' }, '/v1')).resolves.toMatchObject({
        name: 'team-a',
      });
      await expect(gateway.checkKey({ authorization: 'Bearer k-metrics' }, '/v1')).rejects.toMatchObject({
        code: 'permission_denied',
        message:
          'key "prom" has the metrics role, which reads /metrics only: use a user key for /v1 (llmgw ctl key create NAME)',
      });
    } finally {
      await gateway.stop();
    }
  });
});
