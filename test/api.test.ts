import { readFileSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { RawConnection } from './support/raw-http.js';

const declared = `# the team's models
models:
  - name: tiny
    source: /models/tiny.gguf
    profiles:
      - name: cpu
        engine: llamacpp
        cpu: true
`;

const qwen = {
  name: 'qwen-7b',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 8192,
  profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g', tp: 2 }],
};

describe('control-plane API over HTTP', () => {
  let t: TestControlPlane;
  let userKey: string;

  beforeAll(async () => {
    t = await startControlPlane({ config: declared });
    const created = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader', role: 'user' });
    expect(created.status).toBe(201);
    userKey = created.body.secret;
  });
  afterAll(async () => {
    await t.stop();
  });

  describe('authentication and roles', () => {
    it('answers health without a key', async () => {
      const r = await api(t.url, undefined, 'GET', '/health');
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ status: 'ok', version: '0.0.0-test', store: 'sqlite' });
    });

    it('refuses every other route without a key (401), saying what to send', async () => {
      for (const path of ['/models', '/keys', '/audit', '/config', '/whoami', '/no-such-route']) {
        const r = await api(t.url, undefined, 'GET', path);
        expect(r.status, path).toBe(401);
        expect(r.body.error.code).toBe('unauthenticated');
        expect(r.body.error.message).toContain('send the header "Authorization: Bearer KEY"');
      }
    });

    it('refuses a wrong key (401) without echoing it', async () => {
      const r = await api(t.url, 'llmgw_key_notarealkeynotarealkey0000', 'GET', '/models');
      expect(r.status).toBe(401);
      expect(r.body.error.message).toBe(
        'the API key is not valid: it was revoked, or mistyped (an admin can make one with llmgw ctl key create)',
      );
      expect(JSON.stringify(r.body)).not.toContain('notarealkey');
    });

    it('lets a user key read the catalog, and refuses it admin routes (403)', async () => {
      expect((await api(t.url, userKey, 'GET', '/models')).status).toBe(200);
      expect((await api(t.url, userKey, 'GET', '/whoami')).body).toEqual({ name: 'reader', role: 'user' });
      for (const [method, path, body] of [
        ['POST', '/models', qwen],
        ['DELETE', '/models/tiny', undefined],
        ['GET', '/keys', undefined],
        ['POST', '/keys', { name: 'x' }],
        ['GET', '/audit', undefined],
        ['GET', '/config', undefined],
      ] as const) {
        const r = await api(t.url, userKey, method, path, body);
        expect(r.status, `${method} ${path}`).toBe(403);
        expect(r.body.error).toEqual({
          code: 'permission_denied',
          message: 'this needs an admin key; key "reader" has the user role',
        });
      }
    });

    it('refuses a revoked key at once', async () => {
      const k = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'short-lived', role: 'admin' });
      expect((await api(t.url, k.body.secret, 'GET', '/models')).status).toBe(200);
      expect((await api(t.url, t.adminKey, 'DELETE', '/keys/short-lived')).status).toBe(200);
      expect((await api(t.url, k.body.secret, 'GET', '/models')).status).toBe(401);
    });

    // The body is not read: the answer says the connection closes, and it does (not keep-alive, then a close).
    it('refuses a body sent without a key (401) with Connection: close, and closes the connection', async () => {
      const { hostname, port } = new URL(t.url);
      const conn = await RawConnection.open(hostname, Number(port));
      const body = JSON.stringify({ name: 'x', pad: 'p'.repeat(300_000) });
      await conn.write([
        `POST /api/v1/keys HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      ]);
      const a = await conn.answer();
      expect(a.status).toBe(401);
      expect(a.headers['connection']).toBe('close');
      expect((JSON.parse(a.body) as { error: { code: string } }).error.code).toBe('unauthenticated');
      await conn.closed;
    });

    it('answers unknown routes with 404 in the error shape', async () => {
      const r = await api(t.url, t.adminKey, 'GET', '/nothing');
      expect(r.status).toBe(404);
      expect(r.body.error).toEqual({
        code: 'not_found',
        message: 'no API route GET /api/v1/nothing (llmgw ctl --help lists what the API offers)',
      });
    });
  });

  describe('models', () => {
    it('lists declared models as read-only config models', async () => {
      const r = await api(t.url, t.adminKey, 'GET', '/models/tiny');
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        name: 'tiny',
        metadata: { origin: 'config' },
        profiles: [{ name: 'cpu', engine: 'llamacpp', cpu: true }],
      });
    });

    it('adds, reads, patches, replaces and deletes a model, auditing each change by key name', async () => {
      const added = await api(t.url, t.adminKey, 'POST', '/models', qwen);
      expect(added.status).toBe(201);
      expect(added.headers.get('location')).toBe('/api/v1/models/qwen-7b');
      expect(added.body.metadata).toMatchObject({ origin: 'api', version: 1, created_by: 'admin' });
      expect(added.body.profiles[0]).toMatchObject({ tp: 2, gpus_per_node: 2, nodes: 1 });

      const list = await api(t.url, userKey, 'GET', '/models');
      expect(list.body.items.map((m: { name: string }) => m.name)).toEqual(['qwen-7b', 'tiny']);

      const patched = await api(t.url, t.adminKey, 'PATCH', '/models/qwen-7b', { replicas: 3 });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ replicas: 3, metadata: { version: 2 } });

      const got = await api(t.url, t.adminKey, 'GET', '/models/qwen-7b');
      expect(got.headers.get('etag')).toBe('"2"');
      const replaced = await api(t.url, t.adminKey, 'PUT', '/models/qwen-7b', {
        ...got.body,
        context_length: 4096,
      });
      expect(replaced.status).toBe(200);
      expect(replaced.body).toMatchObject({ context_length: 4096, replicas: 3, metadata: { version: 3 } });

      // Sending back what was read, after someone else changed it, is refused.
      const stale = await api(t.url, t.adminKey, 'PUT', '/models/qwen-7b', got.body);
      expect(stale.status).toBe(409);
      expect(stale.body.error.message).toBe(
        'model "qwen-7b" changed since you read it (version 2, now 3): read it again and reapply your change',
      );
      const staleHeader = await api(
        t.url,
        t.adminKey,
        'PATCH',
        '/models/qwen-7b',
        { replicas: 1 },
        { 'if-match': '"1"' },
      );
      expect(staleHeader.status).toBe(409);

      const deleted = await api(t.url, t.adminKey, 'DELETE', '/models/qwen-7b');
      expect(deleted.status).toBe(200);
      expect((await api(t.url, t.adminKey, 'GET', '/models/qwen-7b')).status).toBe(404);

      const audit = await api(t.url, t.adminKey, 'GET', '/audit?target=model/qwen-7b');
      expect(
        audit.body.items.map((e: { action: string; actor: string }) => `${e.action} by ${e.actor}`),
      ).toEqual([
        'model.delete by admin',
        'model.update by admin',
        'model.update by admin',
        'model.create by admin',
      ]);
      expect(audit.body.items[2].detail.changes).toEqual([{ path: 'replicas', before: 1, after: 3 }]);
    });

    it('refuses to change a declared model, saying where to change it', async () => {
      for (const [method, body] of [
        ['PUT', { ...qwen, name: 'tiny' }],
        ['PATCH', { replicas: 2 }],
        ['DELETE', undefined],
      ] as const) {
        const r = await api(t.url, t.adminKey, method, '/models/tiny', body);
        expect(r.status, method).toBe(409);
        expect(r.body.error.code).toBe('read_only');
        expect(r.body.error.message).toBe(
          `model "tiny" is declared in the settings file ${t.configPath}, so it is read-only through the API: change it there with llmgw ctl config edit`,
        );
      }
      const add = await api(t.url, t.adminKey, 'POST', '/models', { ...qwen, name: 'tiny' });
      expect(add.status).toBe(409);
      expect(add.body.error.message).toContain('is already declared in the settings file');
    });

    it('refuses an invalid model with every problem, listed by path, and stores nothing', async () => {
      const r = await api(t.url, t.adminKey, 'POST', '/models', {
        ...qwen,
        name: 'Bad_Name',
        colour: 'red',
        profiles: [{ name: 'g', engine: 'llamacpp', gpu_class: 'a100-80g', tp: 2 }],
      });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('invalid_argument');
      expect(r.body.error.issues).toEqual([
        { path: 'colour', message: expect.stringContaining('unknown key "colour"') },
      ]);
      const r2 = await api(t.url, t.adminKey, 'POST', '/models', {
        ...qwen,
        name: 'Bad_Name',
        profiles: [{ name: 'g', engine: 'llamacpp', gpu_class: 'a100-80g', tp: 2 }],
      });
      expect(r2.body.error.message).toBe(
        'invalid model, nothing was changed:\nname: model name "Bad_Name" is not a DNS label (lower-case letters, digits and \'-\', starting and ending with a letter or digit, at most 63 characters): write "bad-name" instead\n' +
          "profiles[0].tp: llamacpp splits a model across a node's GPUs by layer, not by tp or pp: write gpus_per_node: 2 instead",
      );
      expect((await api(t.url, t.adminKey, 'GET', '/models')).body.items).toHaveLength(1);
    });

    it('refuses a patch that would make the model invalid, and keeps the model as it was', async () => {
      await api(t.url, t.adminKey, 'POST', '/models', { ...qwen, name: 'patchme' });
      const r = await api(t.url, t.adminKey, 'PATCH', '/models/patchme', {
        profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g', tp: 2, gpus_per_node: 3 }],
      });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain('gpus_per_node (3) × nodes (1) is 3');
      expect((await api(t.url, t.adminKey, 'GET', '/models/patchme')).body.metadata.version).toBe(1);
    });

    it('refuses renaming through PUT', async () => {
      await api(t.url, t.adminKey, 'POST', '/models', { ...qwen, name: 'keepname' });
      const r = await api(t.url, t.adminKey, 'PUT', '/models/keepname', { ...qwen, name: 'newname' });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain('a model cannot be renamed');
    });

    it('suggests the near name of a model that does not exist', async () => {
      const r = await api(t.url, t.adminKey, 'GET', '/models/tinny');
      expect(r.status).toBe(404);
      expect(r.body.error.message).toBe(
        'model "tinny" does not exist; did you mean "tiny"? (llmgw ctl models lists them)',
      );
    });

    it('refuses malformed JSON (400), a wrong content type (415) and an oversized body (413)', async () => {
      const bad = await api(t.url, t.adminKey, 'POST', '/models', '{"name": ');
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toMatch(/^the body is not valid JSON: /);
      const type = await api(t.url, t.adminKey, 'POST', '/models', 'name: x', {
        'content-type': 'text/yaml',
      });
      expect(type.status).toBe(415);
      expect(type.body.error.message).toBe(
        'send the body as JSON with "Content-Type: application/json" (got "text/yaml")',
      );
      const big = await api(t.url, t.adminKey, 'POST', '/models', {
        ...qwen,
        name: 'big',
        profiles: [{ ...qwen.profiles[0], args: ['x'.repeat(2 * 1024 * 1024)] }],
      });
      expect(big.status).toBe(413);
      expect(big.body.error.code).toBe('payload_too_large');
    });
  });

  describe('keys', () => {
    it('shows a new secret once, stores only its hash, and lists keys without secrets', async () => {
      const r = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'ci-bot' });
      expect(r.status).toBe(201);
      expect(r.body.secret).toMatch(/^llmgw_key_[A-Za-z0-9]{32}$/);
      expect(r.body.key).toMatchObject({ name: 'ci-bot', role: 'user', created_by: 'admin' });
      const list = await api(t.url, t.adminKey, 'GET', '/keys');
      expect(JSON.stringify(list.body)).not.toContain(r.body.secret);
      expect(list.body.items.find((k: { name: string }) => k.name === 'ci-bot').prefix).toBe(
        `${r.body.secret.slice(0, 14)}...`,
      );
      const db = readFileSync(t.cp.settings.current.settings.database.slice('sqlite:'.length));
      expect(db.includes(Buffer.from(r.body.secret))).toBe(false);
    });

    it('refuses bad key requests with messages that say what to write', async () => {
      const dup = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'reader' });
      expect(dup.status).toBe(409);
      expect(dup.body.error.message).toBe(
        'a key named "reader" already exists: revoke it first, or pick another name',
      );
      const name = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'Has Space' });
      expect(name.status).toBe(400);
      expect(name.body.error.message).toContain('a key name is lower-case letters');
      const role = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'x', role: 'root' });
      expect(role.body.error.message).toContain(
        'role: expected one of "admin", "user", "gateway", "metrics", got "root"',
      );
      const extra = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'x', expires: 'never' });
      expect(extra.body.error.message).toContain('unknown key "expires"');
      const system = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'system' });
      expect(system.body.error.message).toContain('"system" is reserved');
      const self = await api(t.url, t.adminKey, 'DELETE', '/keys/admin');
      expect(self.status).toBe(409);
      expect(self.body.error.message).toContain('is the one making this request');
      const missing = await api(t.url, t.adminKey, 'DELETE', '/keys/ghost');
      expect(missing.status).toBe(404);
    });
  });

  describe('audit', () => {
    it('filters and pages, and refuses a bad query', async () => {
      const r = await api(t.url, t.adminKey, 'GET', '/audit?action=key.create&limit=2');
      expect(r.body.items).toHaveLength(2);
      expect(r.body.items.every((e: { action: string }) => e.action === 'key.create')).toBe(true);
      const bad = await api(t.url, t.adminKey, 'GET', '/audit?since=yesterday');
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain('since: expected an ISO time such as 2026-12-01T09:00:00Z');
      const unknown = await api(t.url, t.adminKey, 'GET', '/audit?who=me');
      expect(unknown.body.error.message).toContain('unknown key "who"');
    });
  });

  describe('config', () => {
    it('returns the settings file as text with an ETag', async () => {
      const r = await api(t.url, t.adminKey, 'GET', '/config');
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toContain('application/yaml');
      expect(r.body).toBe(declared);
      expect(r.headers.get('etag')).toMatch(/^"[0-9a-f]{16}"$/);
    });

    it('refuses invalid settings with file and line, and changes nothing on disk or in memory', async () => {
      const text = `${declared}        tp: 2\n`;
      const r = await api(
        t.url,
        t.adminKey,
        'PUT',
        '/config',
        text.replace('cpu: true', 'gpu_class: a100-80g'),
        { 'content-type': 'application/yaml' },
      );
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain(
        `${t.configPath}:9: models[0].profiles[0].tp: llamacpp splits a model`,
      );
      expect(r.body.error.issues[0]).toMatchObject({ line: 9 });
      expect(readFileSync(t.configPath, 'utf8')).toBe(declared);
      expect((await api(t.url, t.adminKey, 'GET', '/models/tiny')).body.profiles[0].cpu).toBe(true);
    });

    it('applies new models at once, and says which keys need a restart', async () => {
      const before = await api(t.url, t.adminKey, 'GET', '/config');
      const next = `listen: 127.0.0.1:9999\n${declared}  - name: tiny2\n    source: /models/tiny.gguf\n    profiles: [{name: cpu, engine: llamacpp, cpu: true}]\n`;
      const r = await api(t.url, t.adminKey, 'PUT', '/config', next, {
        'content-type': 'application/yaml',
        'if-match': before.headers.get('etag')!,
      });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        changed: true,
        applied: ['models'],
        restart_required: ['listen'],
        overridden_by_env: ['data_dir'],
      });
      expect(readFileSync(t.configPath, 'utf8')).toBe(next);
      expect((await api(t.url, t.adminKey, 'GET', '/models/tiny2')).body.metadata.origin).toBe('config');
      const audit = await api(t.url, t.adminKey, 'GET', '/audit?action=config.update');
      expect(audit.body.items[0].detail.restart_required).toEqual(['listen']);
      // The same text again changes nothing; an old ETag is refused.
      const same = await api(t.url, t.adminKey, 'PUT', '/config', next, {
        'content-type': 'application/yaml',
      });
      expect(same.body.changed).toBe(false);
      const stale = await api(t.url, t.adminKey, 'PUT', '/config', declared, {
        'content-type': 'application/yaml',
        'if-match': before.headers.get('etag')!,
      });
      expect(stale.status).toBe(412);
      expect(stale.body.error.message).toBe(
        'the settings file changed since you read it: read it again (llmgw ctl config edit) and redo your change',
      );
      await api(t.url, t.adminKey, 'PUT', '/config', declared, { 'content-type': 'application/yaml' });
    });

    it('refuses to declare a model that was added through the API', async () => {
      await api(t.url, t.adminKey, 'POST', '/models', { ...qwen, name: 'stored-one' });
      const text = `${declared}  - name: stored-one\n    source: /m.gguf\n    profiles: [{name: cpu, engine: llamacpp, cpu: true}]\n`;
      const r = await api(t.url, t.adminKey, 'PUT', '/config', text, { 'content-type': 'application/yaml' });
      expect(r.status).toBe(409);
      expect(r.body.error.message).toBe(
        'the settings declare "stored-one", already added through the API: remove it there first (llmgw ctl model rm NAME), or declare another name',
      );
      expect(readFileSync(t.configPath, 'utf8')).toBe(declared);
    });
  });

  it('never writes a secret to its log', async () => {
    const created = await api(t.url, t.adminKey, 'POST', '/keys', { name: 'logged' });
    await api(t.url, created.body.secret, 'GET', '/models');
    await api(t.url, 'llmgw_key_wrongwrongwrongwrongwrongwrong12', 'GET', '/models');
    const logs = t.logs();
    expect(logs).toContain('"path":"/api/v1/models"');
    expect(logs).toContain('"key":"logged"');
    expect(logs).not.toContain(created.body.secret);
    expect(logs).not.toContain(t.adminKey);
    expect(logs).not.toContain('wrongwrong');
  });
});

describe('the connections of one client address', () => {
  it('are bounded by gateway.max_connections_per_client: one past it is answered 503 and closed', async () => {
    const t = await startControlPlane({ config: 'gateway:\n  max_connections_per_client: 2\n' });
    try {
      const { hostname, port } = new URL(t.url);
      const health = 'GET /api/v1/health HTTP/1.1\r\nHost: t\r\n\r\n';
      const held = [
        await RawConnection.open(hostname, Number(port)),
        await RawConnection.open(hostname, Number(port)),
      ];
      for (const c of held) {
        await c.write([health]);
        expect((await c.answer()).status).toBe(200);
      }
      const third = await RawConnection.open(hostname, Number(port));
      await third.write([health]);
      const refused = await third.answer();
      expect(refused.status).toBe(503);
      expect((JSON.parse(refused.body) as { error: { message: string } }).error.message).toMatch(
        /^127\.0\.0\.1 has 2 connections open here, the most one address may \(gateway\.max_connections_per_client\)/,
      );
      await third.closed;
      for (const c of held) c.socket.destroy();
    } finally {
      await t.stop();
    }
  });
});
