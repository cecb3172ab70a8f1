import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';

// Issue 25 item 6: a change with nothing in it (PATCH {}) reached the store as an update with
// nothing to set, which SQLite answers "near "where": syntax error": a 500. Every partial
// change refuses it at the edge with the fields that can change, and changes nothing.

const qwen = {
  name: 'qwen-7b',
  source: 'hf://Qwen/Qwen2.5-7B-Instruct',
  context_length: 8192,
  profiles: [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g', tp: 2 }],
};

const keyFields =
  'nothing to change: the body names none of the fields that can change (models, rpm, tpm); send at least one, e.g. {"rpm": 60}';
const modelFields =
  'nothing to change: the body names none of the fields that can change (source, context_length, max_output, replicas, autoscale, profiles); send at least one, e.g. {"replicas": 2}';

describe('a change with nothing in it', () => {
  let t: TestControlPlane;

  beforeAll(async () => {
    t = await startControlPlane();
    expect((await api(t.url, t.adminKey, 'POST', '/keys', { name: 'ci', role: 'user', rpm: 5 })).status).toBe(
      201,
    );
    expect((await api(t.url, t.adminKey, 'POST', '/models', qwen)).status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  const actions = async (target: string) =>
    (await api(t.url, t.adminKey, 'GET', `/audit?target=${target}`)).body.items.map(
      (e: { action: string }) => e.action,
    );

  it('is refused for a key (400, naming the fields that can change), and the key is kept as it was', async () => {
    // The fuzz suite's seed 1371177831 sent "\ufeff{}": the BOM is dropped, leaving {}.
    for (const body of ['{}', '\ufeff{}']) {
      const r = await api(t.url, t.adminKey, 'PATCH', '/keys/ci', body);
      expect(r.status, body).toBe(400);
      expect(r.body.error).toEqual({ code: 'invalid_argument', message: keyFields });
    }
    // Before the key is looked up: a name no key has gets the same answer, not a 500 or a 404.
    const long = await api(t.url, t.adminKey, 'PATCH', `/keys/${'a'.repeat(3000)}`, {});
    expect(long.status).toBe(400);
    expect(long.body.error.message).toBe(keyFields);
    const key = (await api(t.url, t.adminKey, 'GET', '/keys')).body.items.find(
      (k: { name: string }) => k.name === 'ci',
    );
    expect(key).toMatchObject({ rpm: 5, tpm: null, allowed_models: null });
    expect(await actions('key/ci')).toEqual(['key.create']);
    // A change that clears a limit (null) is a change.
    const cleared = await api(t.url, t.adminKey, 'PATCH', '/keys/ci', { rpm: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.rpm).toBeNull();
  });

  it('is refused for a model, also when it carries only the metadata read with it, and the version stays', async () => {
    const read = (await api(t.url, t.adminKey, 'GET', '/models/qwen-7b')).body;
    for (const body of [{}, { metadata: read.metadata }, { metadata: read.metadata, status: read.status }]) {
      const r = await api(t.url, t.adminKey, 'PATCH', '/models/qwen-7b', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toEqual({ code: 'invalid_argument', message: modelFields });
    }
    expect((await api(t.url, t.adminKey, 'GET', '/models/qwen-7b')).body.metadata.version).toBe(1);
    expect(await actions('model/qwen-7b')).toEqual(['model.create']);
    // Unknown fields are not "nothing": the model's own validation names them.
    const unknown = await api(t.url, t.adminKey, 'PATCH', '/models/qwen-7b', { colour: 'red' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toContain('unknown key "colour"');
    const scaled = await api(t.url, t.adminKey, 'PATCH', '/models/qwen-7b', { replicas: 2 });
    expect(scaled.status).toBe(200);
    expect(scaled.body.metadata.version).toBe(2);
  });
});
