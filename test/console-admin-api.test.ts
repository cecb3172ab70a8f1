/**
 * The console's client of the admin views (console/src/api.ts and the views' query builders)
 * against a real control plane: the calls the Keys, Usage, Audit and Settings views make, as
 * the server answers them.
 */
import { readFileSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Api, ApiError } from '../console/src/api.js';
import { auditQuery, nextBefore } from '../console/src/views/audit-filter.js';
import { usageQuery } from '../console/src/views/usage-series.js';

import { api as raw, startControlPlane, type TestControlPlane } from './support/control-plane.js';

const settings = 'gateway:\n  max_connections_per_client: 20\nhub:\n  token: hf_secretsecret\n';

let t: TestControlPlane;
let admin: Api;

function consoleApi(key: string): Api {
  return new Api({ key, fetch: (input, init) => fetch(`${t.url}${input as string}`, init) });
}

async function refusalOf(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

beforeAll(async () => {
  t = await startControlPlane({ config: settings });
  admin = consoleApi(t.adminKey);
});
afterAll(async () => {
  await t.stop();
});

describe("the console's admin calls against a control plane", () => {
  it('creates a key with limits (its secret once), changes and clears limits, and revokes it', async () => {
    const created = await admin.createKey({
      name: 'ci-bot',
      role: 'user',
      models: ['qwen'],
      rpm: 60,
      tpm: null,
    });
    expect(created.secret).toMatch(/^llmgw_/);
    expect(created.key).toMatchObject({ name: 'ci-bot', allowed_models: ['qwen'], rpm: 60, tpm: null });
    // The list shows the prefix, as the server cuts it ("llmgw_key_ab12...").
    expect(created.secret.startsWith(created.key.prefix.replace(/\.\.\.$/, ''))).toBe(true);

    const changed = await admin.updateKey('ci-bot', { models: null, rpm: null, tpm: 5000 });
    expect(changed).toMatchObject({ allowed_models: null, rpm: null, tpm: 5000 });

    const dup = await refusalOf(admin.createKey({ name: 'ci-bot', role: 'user' }));
    expect(dup.status).toBe(409);
    expect(dup.message).toContain('ci-bot');

    const self = await refusalOf(admin.revokeKey('admin'));
    expect(self.message).toBe(
      'key "admin" is the one making this request: revoke it with another admin key, so that one stays usable',
    );
    expect((await admin.revokeKey('ci-bot')).revoked_by).toBe('admin');
    // The list holds revoked keys too, and never a secret.
    const keys = await admin.keys();
    expect(keys.find((k) => k.name === 'ci-bot')?.revoked_at).not.toBeNull();
    expect(JSON.stringify(keys)).not.toContain(created.secret);

    const user = await admin.createKey({ name: 'reader', role: 'user' });
    const refused = await refusalOf(consoleApi(user.secret).keys());
    expect(refused.status).toBe(403);
  });

  it('filters the audit log and pages back by id', async () => {
    for (const name of ['a1', 'a2', 'a3']) await admin.createKey({ name, role: 'user' });
    const all = await admin.audit(auditQuery({ action: 'key.create' }, { limit: 1000 }));
    expect(all.length).toBeGreaterThanOrEqual(3);
    expect(new Set(all.map((e) => e.action))).toEqual(new Set(['key.create']));

    const first = await admin.audit(auditQuery({ action: 'key.create' }, { limit: 2 }));
    expect(first).toHaveLength(2);
    const second = await admin.audit(
      auditQuery({ action: 'key.create' }, { limit: 2, before: nextBefore(first, 2) }),
    );
    expect([...first, ...second].map((e) => e.id)).toEqual(
      all.slice(0, first.length + second.length).map((e) => e.id),
    );

    const byTarget = await admin.audit(
      auditQuery({ target: 'key/a2', since: '2020-01-01T00:00:00.000Z' }, { limit: 50 }),
    );
    expect(byTarget.map((e) => e.target)).toEqual(['key/a2']);
    const bad = await refusalOf(admin.audit(auditQuery({ since: 'soon' }, { limit: 50 })));
    expect(bad.message).toContain('expected an ISO time such as 2026-12-01T09:00:00Z');
  });

  it('reads usage by key, model and since', async () => {
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString();
    const row = { hour, requests: 2, prompt_tokens: 10, completion_tokens: 20 };
    const w = await raw(t.url, t.adminKey, 'POST', '/gateway/usage', {
      rows: [
        { ...row, key_name: 'a1', model: 'qwen' },
        { ...row, key_name: 'a2', model: 'llama:sql' },
      ],
    });
    expect(w.status).toBe(200);
    expect((await admin.usage(usageQuery({}))).length).toBe(2);
    expect(await admin.usage(usageQuery({ key: 'a2', model: 'llama:sql', since: hour }))).toEqual([
      { ...row, key_name: 'a2', model: 'llama:sql' },
    ]);
    expect(await admin.usage(usageQuery({ since: new Date(Date.now() + 7_200_000).toISOString() }))).toEqual(
      [],
    );
  });

  it('reads the settings with the secret hidden, refuses invalid ones with the line, and saves with the version', async () => {
    const c = await admin.getConfig();
    expect(c.text).toBe(settings.replace('hf_secretsecret', '(hidden)'));
    expect(c.etag).toMatch(/^"[0-9a-f]{16}"$/);
    expect(c.path).toBe(t.configPath);

    const bad = await refusalOf(admin.putConfig(c.text.replace('20', 'many'), c.etag));
    expect(bad.code).toBe('invalid_argument');
    expect(bad.message).toContain(`${t.configPath}:2: gateway.max_connections_per_client:`);
    expect(bad.issues[0]).toMatchObject({ line: 2 });
    expect(readFileSync(t.configPath, 'utf8')).toBe(settings);

    const yamlError = await refusalOf(admin.putConfig(`${c.text}listen: [\n`, c.etag));
    expect(yamlError.message).toContain('not valid YAML at column');

    const change = await admin.putConfig(c.text.replace('20', '30'), c.etag);
    expect(change.changed).toBe(true);
    // The hidden token is kept on the round trip.
    expect(readFileSync(t.configPath, 'utf8')).toBe(settings.replace('20', '30'));

    const stale = await refusalOf(admin.putConfig(c.text, c.etag));
    expect(stale.code).toBe('precondition_failed');
    expect(readFileSync(t.configPath, 'utf8')).toBe(settings.replace('20', '30'));
  });
});
