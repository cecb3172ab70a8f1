import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { FakeHub } from './fakes/hub/hub.js';
import { llmgw } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';
import { llamaGguf, llamaGgufFile, llamaGgufRepo, startTestHub, testRepos } from './support/hub.js';

const token = 'hf_test_token_abcdefghijklmnop0123';
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const llamaSource = `hf://${llamaGgufRepo}/${llamaGgufFile}`;
const cpu = [{ name: 'cpu', engine: 'llamacpp', cpu: true }];
const vllm = [{ name: 'l4', engine: 'vllm', gpu_class: 'l4-24g' }];
const yaml = { 'content-type': 'application/yaml' };

/** An address nothing listens on: a port the OS handed out, then closed. */
async function closedAddress(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

describe('model sources resolved when a model is added', () => {
  let t: TestControlPlane;

  beforeAll(async () => {
    t = await startControlPlane({ config: `hub:\n  token: ${token}\n` });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('pins a GGUF file to its commit with its sha256, and reads its shape from the header alone', async () => {
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'llama-8b',
      source: llamaSource,
      profiles: cpu,
    });
    expect(added.status).toBe(201);
    const commit = testRepos()[llamaGgufRepo]!.commit;
    const origin = {
      source: llamaSource,
      kind: 'hf',
      repo: llamaGgufRepo,
      revision: 'main',
      commit,
      files: [{ path: llamaGgufFile, size: llamaGguf.length, sha256: sha256(llamaGguf) }],
    };
    expect(added.body.status.origin).toEqual(origin);
    expect(added.body.status.problem).toBeUndefined();
    const shape = added.body.status.shape;
    expect(shape).toMatchObject({
      from: 'gguf',
      architecture: 'llama',
      layers: { known: true, value: 32 },
      attentionHeads: { known: true, value: 32 },
      kvHeads: { known: true, value: 8 },
      keyHeadDim: { known: true, value: 128 },
      valueHeadDim: { known: true, value: 128 },
      slidingWindow: { known: true, value: null },
      mla: { known: true, value: null },
      trainedContext: { known: true, value: 131072 },
      dtype: { known: true, value: 'Q4_K_M' },
      kv: { known: true, value: { perToken: 131072, elementBytes: 2 } },
    });
    // The API shows what was stored, and so does a second read.
    const got = await api(t.url, t.adminKey, 'GET', '/models/llama-8b');
    expect(got.body.status).toEqual(added.body.status);
    expect(await t.cp.store.origins.get('llama-8b')).toMatchObject({
      source: llamaSource,
      origin,
      problem: null,
    });
    // Only the header was read: far less than the file.
    const ranges = t.hub.requests.filter((r) => r.server === 'files' && r.url.includes(sha256(llamaGguf)));
    expect(ranges.length).toBeGreaterThan(0);
    expect(ranges.every((r) => r.range?.startsWith('bytes=0-'))).toBe(true);
  });

  it('sends the token to the hub only, never to the server its files are redirected to', () => {
    const hub = t.hub.requests.filter((r) => r.server === 'hub');
    const files = t.hub.requests.filter((r) => r.server === 'files');
    expect(hub.length).toBeGreaterThan(0);
    expect(files.length).toBeGreaterThan(0);
    expect(hub.every((r) => r.authorization === `Bearer ${token}`)).toBe(true);
    expect(files.map((r) => r.authorization)).toEqual(files.map(() => undefined));
    expect(t.logs()).not.toContain(token);
  });

  it("reads a safetensors repository's shape from its config.json and the sizes of its shards", async () => {
    const added = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'qwen-7b',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      profiles: vllm,
    });
    expect(added.status).toBe(201);
    const { origin, shape } = added.body.status;
    expect(origin.commit).toBe('a09a35458c702b33eeacc393d103063234e8bc28');
    expect(origin.files.map((f: { path: string }) => f.path)).toEqual([
      'config.json',
      'generation_config.json',
      'tokenizer_config.json',
      'tokenizer.json',
      'model.safetensors.index.json',
      'model-00001-of-00004.safetensors',
      'model-00002-of-00004.safetensors',
      'model-00003-of-00004.safetensors',
      'model-00004-of-00004.safetensors',
    ]);
    expect(shape).toMatchObject({
      from: 'config',
      architecture: 'qwen2',
      layers: { known: true, value: 28 },
      attentionHeads: { known: true, value: 28 },
      kvHeads: { known: true, value: 4 },
      keyHeadDim: { known: true, value: 128 },
      slidingWindow: { known: true, value: null },
      trainedContext: { known: true, value: 32768 },
      weightBytes: { known: true, value: 3_945_441_440 + 3_864_726_352 + 3_864_726_424 + 3_556_377_672 },
      dtype: { known: true, value: 'bf16' },
      // 28 layers × 2 × 4 KV heads × 128 × 2 bytes.
      kv: { known: true, value: { perToken: 57_344, elementBytes: 2 } },
    });
    // Unknown, with the reason: never a guessed 0.
    expect(shape.parameters).toEqual({ known: false, reason: 'config.json does not give a parameter count' });
  });

  const refusals: [string, string, string, unknown[]][] = [
    [
      'a missing repository',
      'hf://nobody/nothing',
      'the hub at HUB has no repository nobody/nothing: check the name in hf://nobody/nothing (a private one needs hub.token)',
      vllm,
    ],
    [
      'a missing file',
      `hf://${llamaGgufRepo}/nope.gguf`,
      `hf://${llamaGgufRepo} has no file nope.gguf at main (commit 0123456789abcdef0123456789abcdef01234567)`,
      cpu,
    ],
    [
      'a GGUF repository named without a file',
      `hf://${llamaGgufRepo}`,
      `hf://${llamaGgufRepo} holds GGUF files: name one file: hf://${llamaGgufRepo}/FILE; this repository has: Meta-Llama-3.1-8B-Instruct-Q2_K.gguf (3.2 GB), ${llamaGgufFile} (3 MB), Meta-Llama-3.1-8B-Instruct-Q8_0.gguf (8.5 GB)`,
      cpu,
    ],
    [
      'a missing revision',
      'hf://Qwen/Qwen2.5-7B-Instruct@v9',
      'Qwen/Qwen2.5-7B-Instruct has no revision v9 (no branch, tag or commit of that name): check hf://Qwen/Qwen2.5-7B-Instruct@v9',
      vllm,
    ],
  ];

  it.each(refusals)('refuses %s in words, and stores nothing', async (_what, source, message, profiles) => {
    const audit = (await api(t.url, t.adminKey, 'GET', '/audit?target=model/refused')).body.items;
    const r = await api(t.url, t.adminKey, 'POST', '/models', { name: 'refused', source, profiles });
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual({ code: 'invalid_argument', message: message.replace('HUB', t.hub.url) });
    expect((await api(t.url, t.adminKey, 'GET', '/models/refused')).status).toBe(404);
    expect(await t.cp.store.origins.get('refused')).toBeUndefined();
    expect((await api(t.url, t.adminKey, 'GET', '/audit?target=model/refused')).body.items).toEqual(audit);
  });

  it('refuses a patch or a replacement to a source that does not resolve, and keeps the model as it was', async () => {
    const before = await api(t.url, t.adminKey, 'GET', '/models/qwen-7b');
    const stored = await t.cp.store.origins.get('qwen-7b');
    const patched = await api(t.url, t.adminKey, 'PATCH', '/models/qwen-7b', {
      source: 'hf://Qwen/Qwen2.5-7B-Instruct@nope',
    });
    expect(patched.status).toBe(400);
    expect(patched.body.error.message).toBe(
      'Qwen/Qwen2.5-7B-Instruct has no revision nope (no branch, tag or commit of that name): check hf://Qwen/Qwen2.5-7B-Instruct@nope',
    );
    const replaced = await api(t.url, t.adminKey, 'PUT', '/models/qwen-7b', {
      ...before.body,
      source: 'hf://Qwen/Nope',
    });
    expect(replaced.status).toBe(400);
    expect(replaced.body.error.message).toContain('has no repository Qwen/Nope');
    expect(await api(t.url, t.adminKey, 'GET', '/models/qwen-7b')).toMatchObject({ body: before.body });
    expect(await t.cp.store.origins.get('qwen-7b')).toEqual(stored);
  });

  it('resolves a patched source anew, and keeps the origin when the source stays', async () => {
    await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'moving',
      source: 'hf://org/repo',
      profiles: vllm,
    });
    const first = await t.cp.store.origins.get('moving');
    const scaled = await api(t.url, t.adminKey, 'PATCH', '/models/moving', { replicas: 0 });
    expect(scaled.status).toBe(200);
    expect(await t.cp.store.origins.get('moving')).toEqual(first);
    const moved = await api(t.url, t.adminKey, 'PATCH', '/models/moving', {
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
    });
    expect(moved.status).toBe(200);
    expect(moved.body.status.origin.repo).toBe('Qwen/Qwen2.5-7B-Instruct');
    expect((await t.cp.store.origins.get('moving'))?.source).toBe('hf://Qwen/Qwen2.5-7B-Instruct');
    expect((await api(t.url, t.adminKey, 'DELETE', '/models/moving')).status).toBe(200);
    expect(await t.cp.store.origins.get('moving')).toBeUndefined();
  });

  it("takes a local path the control plane's machine lacks, saying its size and shape are unknown", async () => {
    const r = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'on-nodes',
      source: '/models/not-here/tiny.gguf',
      profiles: cpu,
    });
    expect(r.status).toBe(201);
    expect(r.body.status).toEqual({
      problem:
        "/models/not-here/tiny.gguf is not on the control plane's machine: its files are used in place on the nodes, and its size and shape are unknown",
      resolved_at: expect.any(String),
    });
  });

  it('reads a local GGUF file where the control plane has it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-local-'));
    try {
      writeFileSync(join(dir, 'llama.gguf'), llamaGguf);
      const r = await api(t.url, t.adminKey, 'POST', '/models', {
        name: 'local',
        source: join(dir, 'llama.gguf'),
        profiles: cpu,
      });
      expect(r.status).toBe(201);
      expect(r.body.status.origin).toEqual({
        source: join(dir, 'llama.gguf'),
        kind: 'path',
        revision: '',
        files: [{ path: 'llama.gguf', size: llamaGguf.length }],
      });
      expect(r.body.status.shape.kv).toMatchObject({ known: true, value: { perToken: 131072 } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ignores a status sent back with a model, as it does metadata', async () => {
    const got = await api(t.url, t.adminKey, 'GET', '/models/qwen-7b');
    const back = await api(t.url, t.adminKey, 'PUT', '/models/qwen-7b', {
      ...got.body,
      status: { problem: 'made up' },
      replicas: 2,
    });
    expect(back.status).toBe(200);
    expect(back.body.status).toEqual(got.body.status);
  });
});

describe('a gated repository and an unreachable hub', () => {
  it('refuses a gated repository without a token, saying to set hub.token', async () => {
    const t = await startControlPlane();
    try {
      const r = await api(t.url, t.adminKey, 'POST', '/models', {
        name: 'gated',
        source: 'hf://meta-llama/Llama-3.1-8B-Instruct',
        profiles: vllm,
      });
      expect(r.status).toBe(412);
      expect(r.body.error.message).toBe(
        `hf://meta-llama/Llama-3.1-8B-Instruct is a gated repository: set hub.token (or HF_TOKEN) to a token of an account that was granted access at ${t.hub.url}/meta-llama/Llama-3.1-8B-Instruct`,
      );
      expect((await api(t.url, t.adminKey, 'GET', '/models/gated')).status).toBe(404);
      expect(await t.cp.store.origins.get('gated')).toBeUndefined();
    } finally {
      await t.stop();
    }
  });

  it('takes the token from HF_TOKEN when hub.token is unset, and sends it to the hub only', async () => {
    const envToken = 'hf_from_the_environment_0123456789';
    const t = await startControlPlane({ env: { HF_TOKEN: envToken } });
    try {
      const r = await api(t.url, t.adminKey, 'POST', '/models', {
        name: 'gated',
        source: 'hf://meta-llama/Llama-3.1-8B-Instruct',
        profiles: vllm,
      });
      expect(r.status).toBe(201);
      expect(r.body.status.shape.layers).toEqual({ known: true, value: 32 });
      const sent = t.hub.requests.filter((q) => q.server === 'hub').map((q) => q.authorization);
      expect(sent.length).toBeGreaterThan(0);
      expect(sent.every((a) => a === `Bearer ${envToken}`)).toBe(true);
      expect(t.logs()).not.toContain(envToken);
    } finally {
      await t.stop();
    }
  });

  it('refuses a model while the hub cannot be reached, naming the address tried; a declared one is kept with the problem', async () => {
    const nowhere = await closedAddress();
    const t = await startControlPlane({
      config: [
        'hub:',
        `  endpoint: ${nowhere}`,
        'models:',
        '  - name: declared-far',
        `    source: ${llamaSource}`,
        '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
      ].join('\n'),
    });
    try {
      const r = await api(t.url, t.adminKey, 'POST', '/models', {
        name: 'far',
        source: llamaSource,
        profiles: cpu,
      });
      expect(r.status).toBe(503);
      expect(r.body.error.message).toMatch(
        new RegExp(
          `^the hub at ${nowhere} could not be reached \\(.*ECONNREFUSED.*\\) while resolving hf://${llamaGgufRepo}: check hub\\.endpoint \\(or HF_ENDPOINT\\) and the network$`,
        ),
      );
      expect(await t.cp.store.origins.get('far')).toBeUndefined();

      await t.cp.origins.idle();
      const declared = await api(t.url, t.adminKey, 'GET', '/models/declared-far');
      expect(declared.status).toBe(200);
      expect(declared.body.status.origin).toBeUndefined();
      expect(declared.body.status.problem).toContain(`the hub at ${nowhere} could not be reached`);
    } finally {
      await t.stop();
    }
  });
});

describe('declared models', () => {
  let t: TestControlPlane;
  const declared = [
    'models:',
    '  - name: llama',
    `    source: ${llamaSource}`,
    '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
    '  - name: on-nodes',
    '    source: /models/tiny.gguf',
    '    profiles: [{name: cpu, engine: llamacpp, cpu: true}]',
    '',
  ].join('\n');

  beforeAll(async () => {
    t = await startControlPlane({ config: declared });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('are resolved at start and stored the same way', async () => {
    await t.cp.origins.idle();
    const llama = await api(t.url, t.adminKey, 'GET', '/models/llama');
    expect(llama.body.metadata.origin).toBe('config');
    expect(llama.body.status.origin).toMatchObject({ commit: testRepos()[llamaGgufRepo]!.commit });
    expect(llama.body.status.shape.layers).toEqual({ known: true, value: 32 });
    const path = await api(t.url, t.adminKey, 'GET', '/models/on-nodes');
    expect(path.body.status.problem).toContain("is not on the control plane's machine");
    expect(await t.cp.catalog.origins()).toEqual(new Map([['llama', llama.body.status.origin]]));
  });

  it('refuses new settings declaring a model whose source does not resolve, before writing them', async () => {
    const next = `${declared}  - name: ghost\n    source: hf://nobody/ghost\n    profiles: [{name: l4, engine: vllm, gpu_class: l4-24g}]\n`;
    const r = await api(t.url, t.adminKey, 'PUT', '/config', next, yaml);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe(
      `invalid settings, nothing was applied:\n${t.configPath}:9: models[2].source: the hub at ${t.hub.url} has no repository nobody/ghost: check the name in hf://nobody/ghost (a private one needs hub.token)`,
    );
    expect(readFileSync(t.configPath, 'utf8')).toBe(declared);
    expect((await api(t.url, t.adminKey, 'GET', '/models/ghost')).status).toBe(404);
  });

  it('resolves a model newly declared, and drops the record of one no longer declared', async () => {
    const next = [
      'models:',
      '  - name: on-nodes',
      '    source: hf://Qwen/Qwen2.5-7B-Instruct',
      '    profiles: [{name: l4, engine: vllm, gpu_class: l4-24g}]',
      '',
    ].join('\n');
    const r = await api(t.url, t.adminKey, 'PUT', '/config', next, yaml);
    expect(r.status).toBe(200);
    await t.cp.origins.idle();
    const got = await api(t.url, t.adminKey, 'GET', '/models/on-nodes');
    expect(got.body.status.origin.repo).toBe('Qwen/Qwen2.5-7B-Instruct');
    expect(await t.cp.store.origins.get('llama')).toBeUndefined();
  });
});

describe('re-pinning a model, and llmgw ctl model show', () => {
  let t: TestControlPlane;
  let moved: FakeHub;
  let env: Record<string, string>;

  beforeAll(async () => {
    t = await startControlPlane();
    // The same repository after a new commit on main.
    const repos = testRepos();
    moved = await startTestHub({
      ...repos,
      [llamaGgufRepo]: { ...repos[llamaGgufRepo]!, commit: 'f'.repeat(40) },
    });
    env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey, XDG_CONFIG_HOME: join(t.dir, 'xdg') };
    const r = await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'llama',
      source: llamaSource,
      profiles: cpu,
    });
    expect(r.status).toBe(201);
  });
  afterAll(async () => {
    await moved.close();
    await t.stop();
  });

  it('shows the source, revision, commit, files and shape, with unknowns said as such', async () => {
    const r = await llmgw(['ctl', 'model', 'show', 'llama'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = r.stdout;
    expect(out).toMatch(/^Name: +llama \(added through the API by admin, version 1\)$/m);
    expect(out).toMatch(new RegExp(`^Source: +hf://${llamaGgufRepo}/${llamaGgufFile}$`, 'm'));
    expect(out).toMatch(/^Revision: +main$/m);
    expect(out).toMatch(/^Commit: +0123456789abcdef0123456789abcdef01234567$/m);
    expect(out).toMatch(/^Size: +3 MB in 1 file$/m);
    expect(out).toMatch(
      new RegExp(
        `^  ${llamaGgufFile.replace(/\./g, '\\.')} +3 MB +sha256 ${sha256(llamaGguf).slice(0, 12)}$`,
        'm',
      ),
    );
    expect(out).toContain('Shape (from the GGUF header):');
    expect(out).toMatch(/^ {2}Layers: +32$/m);
    expect(out).toMatch(/^ {2}Attention heads: +32; KV heads 8$/m);
    expect(out).toMatch(/^ {2}Head dims: +key 128, value 128$/m);
    expect(out).toMatch(/^ {2}Sliding window: +none$/m);
    expect(out).toMatch(/^ {2}Trained context: +131072 tokens$/m);
    expect(out).toMatch(/^ {2}Dtype: +Q4_K_M$/m);
    expect(out).toMatch(/^ {2}KV cache: +131072 B per token at 2 bytes a value$/m);
    // No node has joined: whether it fits cannot be told, and show says why rather than failing.
    expect(out).toMatch(/^Memory: +not planned: .*--class/m);
    const json = JSON.parse((await llmgw(['ctl', 'model', 'show', 'llama', '--json'], env)).stdout);
    expect(json.status.origin.commit).toBe('0123456789abcdef0123456789abcdef01234567');
    expect(json.plan.error).toMatch(/--class/);

    await api(t.url, t.adminKey, 'POST', '/models', {
      name: 'qwen',
      source: 'hf://Qwen/Qwen2.5-7B-Instruct',
      profiles: vllm,
    });
    const qwen = (await llmgw(['ctl', 'model', 'show', 'qwen'], env)).stdout;
    expect(qwen).toMatch(/^ {2}Parameters: +unknown \(config\.json does not give a parameter count\)$/m);
    expect(qwen).toMatch(/^Size: +15\.2 GB in 9 files$/m);
  });

  it('gives the definition as YAML to apply again, without its status', async () => {
    const r = await llmgw(['ctl', 'model', 'get', 'llama'], env);
    expect(r.stdout).toContain(`name: llama\nsource: ${llamaSource}`);
    expect(r.stdout).not.toContain('status');
    const back = await llmgw(['ctl', 'model', 'apply', '-f', '-'], env, r.stdout);
    expect(back.stdout.trim()).toBe('model "llama" replaced (version 2)');
  });

  it('pins the new commit of the revision when asked to resolve again, and audits it', async () => {
    const change = await api(t.url, t.adminKey, 'PUT', '/config', `hub:\n  endpoint: ${moved.url}\n`, yaml);
    expect(change.status).toBe(200);
    const r = await llmgw(['ctl', 'model', 'resolve', 'llama'], env);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(`model "llama" resolved: ${llamaSource} at commit ${'f'.repeat(40)} (main)`);
    expect((await t.cp.store.origins.get('llama'))?.origin?.commit).toBe('f'.repeat(40));
    const [entry] = (await api(t.url, t.adminKey, 'GET', '/audit?action=model.resolve')).body.items;
    expect(entry).toMatchObject({
      actor: 'admin',
      target: 'model/llama',
      detail: { commit: 'f'.repeat(40), previous_commit: '0123456789abcdef0123456789abcdef01234567' },
    });
    const json = JSON.parse((await llmgw(['ctl', 'model', 'resolve', 'llama', '--json'], env)).stdout);
    expect(json.status.origin.commit).toBe('f'.repeat(40));
  });

  it('refuses to re-pin when the source no longer resolves, keeping the record', async () => {
    const before = await t.cp.store.origins.get('llama');
    await api(t.url, t.adminKey, 'PUT', '/config', `hub:\n  endpoint: ${await closedAddress()}\n`, yaml);
    const r = await llmgw(['ctl', 'model', 'resolve', 'llama'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('could not be reached');
    expect(await t.cp.store.origins.get('llama')).toEqual(before);
  });
});

describe('hub.token in the settings the API shows', () => {
  let t: TestControlPlane;
  const text = `# our hub\nhub:\n  token: ${token}   # the team's\nlisten: 127.0.0.1:0\n`;

  beforeAll(async () => {
    t = await startControlPlane({ config: text });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('is hidden from the API and ctl config show, and kept by an edit that leaves it', async () => {
    const shown = await api(t.url, t.adminKey, 'GET', '/config');
    expect(shown.body).toBe(`# our hub\nhub:\n  token: (hidden)   # the team's\nlisten: 127.0.0.1:0\n`);
    const env = { LLMGW_SERVER: t.url, LLMGW_KEY: t.adminKey, XDG_CONFIG_HOME: join(t.dir, 'xdg') };
    const show = await llmgw(['ctl', 'config', 'show'], env);
    expect(show.stdout).toContain('token: (hidden)');
    expect(show.stdout).not.toContain(token);

    const edited = shown.body.replace(
      'listen: 127.0.0.1:0',
      'listen: 127.0.0.1:0\nplacement: {node_lost_after_s: 30}',
    );
    const r = await api(t.url, t.adminKey, 'PUT', '/config', edited, {
      ...yaml,
      'if-match': shown.headers.get('etag')!,
    });
    expect(r.status).toBe(200);
    expect(readFileSync(t.configPath, 'utf8')).toBe(edited.replace('(hidden)', token));
    expect(t.cp.settings.current.settings.hub.token).toBe(token);

    const replaced = await api(
      t.url,
      t.adminKey,
      'PUT',
      '/config',
      edited.replace('(hidden)', 'hf_another_token_000000'),
      yaml,
    );
    expect(replaced.status).toBe(200);
    const audit = await api(t.url, t.adminKey, 'GET', '/audit?action=config.update');
    const recorded = JSON.stringify(audit.body);
    expect(recorded).not.toContain(token);
    expect(recorded).not.toContain('hf_another_token_000000');
    expect(audit.body.items[0].detail.changes).toEqual([
      {
        path: 'hub.token',
        before: expect.stringMatching(/^\(set, sha256 [0-9a-f]{8}\)$/),
        after: expect.stringMatching(/^\(set, sha256 [0-9a-f]{8}\)$/),
      },
    ]);
    expect(t.logs()).not.toContain(token);
    expect(t.logs()).not.toContain('hf_another_token_000000');
  });

  it('refuses the placeholder where the file holds no token', async () => {
    await api(t.url, t.adminKey, 'PUT', '/config', 'listen: 127.0.0.1:0\n', yaml);
    const r = await api(t.url, t.adminKey, 'PUT', '/config', 'hub:\n  token: (hidden)\n', yaml);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe(
      'hub.token is "(hidden)", which stands for the token the settings file holds, but it holds none: write the token itself, or remove hub.token',
    );
  });
});
