import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { localModel } from './support/local-model.js';

const cpu = [{ name: 'cpu', engine: 'llamacpp', cpu: true }];
const serves =
  'a local source is a model: a GGUF file, a safetensors file, or a folder with a config.json and weights';
const yaml = { 'content-type': 'application/yaml' };
const relativeAdapter =
  '"../../etc/passwd" is a relative path: write an absolute path, as the agents see it on each node (e.g. /adapters/sql)';

/**
 * Local sources are checked as models before anything is stored, through the API, `ctl model
 * add` and the settings; and a key that is not admin reads of a model what a client needs.
 */
describe('local model sources and adapters, refused in words', () => {
  let t: TestControlPlane;
  let models = '';

  beforeAll(async () => {
    t = await startControlPlane({ config: 'models: []\n' });
    models = mkdtempSync(join(tmpdir(), 'llmgw-models-'));
  });
  afterAll(async () => {
    await t.stop();
    rmSync(models, { recursive: true, force: true });
  });

  it("refuses what is not a model, the control plane's own data and a huge folder, storing nothing", async () => {
    const noModel = join(models, 'notes');
    mkdirSync(noModel);
    writeFileSync(join(noModel, 'README.md'), '# notes\n');
    const huge = join(models, 'huge');
    mkdirSync(huge);
    for (let i = 0; i <= 2000; i++) writeFileSync(join(huge, `f${i}`), '');
    const inData = (p: string) =>
      `${p} is inside the control plane's data dir: llmgw never serves its own data; point source at a model's file or folder`;
    const cases: [string, string][] = [
      [
        '/etc/shadow',
        process.getuid?.() === 0
          ? `/etc/shadow is neither a GGUF file (it would start with the bytes GGUF) nor a safetensors file (an 8-byte header length, then a JSON header): ${serves}`
          : 'llmgw cannot read /etc/shadow (permission denied): the control plane checks that a local source is a model before it takes it; make it readable by the user llmgw runs as',
      ],
      [
        '/proc/self/environ',
        `/proc/self/environ is on procfs (/proc), the kernel's own files, not a model file on a disk: ${serves}`,
      ],
      ['/dev/zero', `/dev/zero is a character device: ${serves}`],
      [
        noModel,
        `${noModel} holds no model: llmgw looks for a config.json with weights beside it (*.safetensors or *.bin) or for .gguf files, 4 folders deep at most; point source at the model's own folder, or at its file`,
      ],
      [
        '/',
        `/ holds the control plane's data dir (${t.dir}): point source at the model's own folder, not one that holds llmgw's data`,
      ],
      [join(t.dir, 'llmgw.db'), inData(join(t.dir, 'llmgw.db'))],
      [join(t.dir, 'engine-key.secret'), inData(join(t.dir, 'engine-key.secret'))],
      [t.configPath, inData(t.configPath)],
      [
        huge,
        `${huge} holds more than 2000 files and folders: llmgw looks at no more than 2000, 4 folders deep, for a model; point source at the model's own folder (the one with its config.json and weights, or its .gguf files), or at its file`,
      ],
    ];
    for (const [source, message] of cases) {
      const r = await api(t.url, t.adminKey, 'POST', '/models', { name: 'bad', source, profiles: cpu });
      expect(r.status, source).toBe(400);
      expect(r.body.error).toEqual({ code: 'invalid_argument', message });
      // Asked to plan, the same words: the plan resolves a source as adding does.
      const plan = await api(t.url, t.adminKey, 'POST', '/plan', { source, classes: ['l4-24g'] });
      expect(plan.body.error.message, source).toBe(message);
    }
    expect((await api(t.url, t.adminKey, 'GET', '/models/bad')).status).toBe(404);
    expect(await t.cp.store.origins.get('bad')).toBeUndefined();
  });

  it('refuses a relative adapter path in the API, ctl model add and the settings', async () => {
    const source = localModel(models);
    const model = {
      name: 'chat',
      source,
      profiles: [{ ...cpu[0], adapters: [{ name: 'sql', path: '../../etc/passwd' }] }],
    };
    const r = await api(t.url, t.adminKey, 'POST', '/models', model);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe(
      `invalid model, nothing was changed:\nprofiles[0].adapters[0].path: ${relativeAdapter}`,
    );

    const ctl = await llmgw(
      ['ctl', 'model', 'add', '-f', '-'],
      { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey },
      JSON.stringify(model),
    );
    expect(ctl.code).toBe(1);
    expect(ctl.stderr).toContain(`profiles[0].adapters[0].path: ${relativeAdapter}`);

    const before = readFileSync(t.configPath, 'utf8');
    const settings = [
      'models:',
      '  - name: chat',
      `    source: ${source}`,
      '    profiles:',
      '      - {name: cpu, engine: llamacpp, cpu: true, adapters: [{name: sql, path: ../../etc/passwd}]}',
      '',
    ].join('\n');
    const put = await api(t.url, t.adminKey, 'PUT', '/config', settings, yaml);
    expect(put.status).toBe(400);
    expect(put.body.error.message).toBe(
      `invalid settings, nothing was applied:\n${t.configPath}:5: models[0].profiles[0].adapters[0].path: ${relativeAdapter}`,
    );
    expect(readFileSync(t.configPath, 'utf8')).toBe(before);
    expect((await api(t.url, t.adminKey, 'GET', '/models/chat')).status).toBe(404);
  });

  it('refuses new settings declaring a local source that is not a model, before writing them', async () => {
    const before = readFileSync(t.configPath, 'utf8');
    const settings =
      'models:\n  - name: shadow\n    source: /dev/zero\n    profiles: [{name: cpu, engine: llamacpp, cpu: true}]\n';
    const put = await api(t.url, t.adminKey, 'PUT', '/config', settings, yaml);
    expect(put.status).toBe(400);
    expect(put.body.error.message).toBe(
      `invalid settings, nothing was applied:\n${t.configPath}:3: models[0].source: /dev/zero is a character device: ${serves}`,
    );
    expect(readFileSync(t.configPath, 'utf8')).toBe(before);
  });
});

describe('what a key that is not admin reads of the models', () => {
  let t: TestControlPlane;
  let models = '';
  let userKey = '';
  let limitedKey = '';
  let source = '';

  beforeAll(async () => {
    t = await startControlPlane();
    models = mkdtempSync(join(tmpdir(), 'llmgw-models-'));
    source = localModel(models, 'private-weights.safetensors');
    const add = (name: string, extra: Record<string, unknown>) =>
      api(t.url, t.adminKey, 'POST', '/models', { name, source, profiles: cpu, ...extra });
    expect(
      (
        await add('chat', {
          context_length: 8192,
          profiles: [{ ...cpu[0], adapters: [{ name: 'sql', path: join(models, 'sql-lora') }] }],
        })
      ).status,
    ).toBe(201);
    expect((await add('idle', { replicas: 0 })).status).toBe(201);
    userKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'dev', role: 'user' })).body.secret;
    limitedKey = (await api(t.url, t.adminKey, 'POST', '/keys', { name: 'one', role: 'user' })).body.secret;
    expect((await api(t.url, t.adminKey, 'PATCH', '/keys/one', { models: ['idle'] })).status).toBe(200);
  });
  afterAll(async () => {
    await t.stop();
    rmSync(models, { recursive: true, force: true });
  });

  it('shows a user key each model as a client needs it: no source, files, sizes, profiles or nodes', async () => {
    const list = await api(t.url, userKey, 'GET', '/models');
    expect(list.status).toBe(200);
    // No node has joined: chat's replica waits for room, and none answers.
    expect(list.body).toEqual({
      items: [
        { name: 'chat', state: 'unavailable', ready_replicas: 0, context_length: 8192, adapters: ['sql'] },
        { name: 'idle', state: 'stopped', ready_replicas: 0, adapters: [] },
      ],
    });
    const one = await api(t.url, userKey, 'GET', '/models/chat');
    expect(one.body).toEqual(list.body.items[0]);
    for (const text of [JSON.stringify(list.body), JSON.stringify(one.body)]) {
      expect(text).not.toContain(models);
      expect(text).not.toContain('private-weights');
    }
    // The files each node holds are an admin's too.
    expect((await api(t.url, userKey, 'GET', '/models/chat/downloads')).status).toBe(403);
    expect((await api(t.url, userKey, 'GET', '/cache')).status).toBe(403);
    // An admin key reads it all, as before.
    const admin = await api(t.url, t.adminKey, 'GET', '/models/chat');
    expect(admin.body.source).toBe(source);
    expect(admin.body.status.origin.files).toEqual([{ path: 'private-weights.safetensors', size: 16 }]);
  });

  it('shows a key limited to some models those only, and the others as not there', async () => {
    const list = await api(t.url, limitedKey, 'GET', '/models');
    expect(list.body.items.map((m: { name: string }) => m.name)).toEqual(['idle']);
    for (const name of ['chat', 'nothing']) {
      const r = await api(t.url, limitedKey, 'GET', `/models/${name}`);
      expect(r.status).toBe(404);
      expect(r.body.error.message).toBe(
        `model "${name}" does not exist, or key "one" may not use it (llmgw ctl models lists those it may)`,
      );
    }
  });

  it('lets ctl models and ctl model show work with a user key', async () => {
    const env = { LLMGW_SERVER: t.url, LLMGW_KEY: userKey };
    const list = await llmgw(['ctl', 'models'], env);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+STATE\s+READY\s+CONTEXT\s+ADAPTERS\n/);
    expect(list.stdout).toMatch(/\nchat\s+unavailable\s+0\s+8192\s+sql\n/);
    const show = await llmgw(['ctl', 'model', 'show', 'chat'], env);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('State:              unavailable\n');
    expect(show.stdout).toContain('Adapters:           chat:sql\n');
    expect(show.stdout).not.toContain(models);
    const json = JSON.parse((await llmgw(['ctl', 'models', '--json'], env)).stdout);
    expect(json.items.map((m: { name: string }) => m.name)).toEqual(['chat', 'idle']);
  });
});
