import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../test/fakes/hub/hub.js';
import { writeSafetensors } from '../../test/fakes/safetensors/writer.js';
import { type ResolveOptions, resolveOrigin } from './resolve.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const shard1 = Buffer.from('shard one');
const shard2 = Buffer.from('shard two');
const config = Buffer.from('{"architectures":["Qwen2ForCausalLM"]}');
const index = Buffer.from(
  JSON.stringify({
    weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' },
  }),
);
const token = 'hf_secretTOKEN123';

describe('resolveOrigin', () => {
  let hub: FakeHub;
  let plain: http.Server;
  let plainUrl: string;
  const plainAuth: (string | undefined)[] = [];
  let opts: ResolveOptions;

  beforeAll(async () => {
    hub = await startFakeHub({
      pageSize: 3,
      repos: {
        'Qwen/Qwen2.5-7B-Instruct': {
          commit: '1'.repeat(40),
          files: {
            'README.md': Buffer.from('# Qwen'),
            'config.json': config,
            'generation_config.json': Buffer.from('{}'),
            'tokenizer.json': Buffer.from('{}'),
            'tokenizer_config.json': Buffer.from('{}'),
            'consolidated.safetensors': Buffer.from('all in one'),
            'model-00001-of-00002.safetensors': shard1,
            'model-00002-of-00002.safetensors': shard2,
            'model.safetensors.index.json': index,
          },
        },
        'bartowski/Big-GGUF': {
          files: {
            'Big-Q4_K_M.gguf': { size: 4_683_073_248, sha256: 'a'.repeat(64) },
            'Big-Q8_0.gguf': { size: 8_540_000_000, sha256: 'b'.repeat(64) },
          },
          revisions: {
            v2: {
              commit: '2'.repeat(40),
              files: {
                'Big-Q8_0-00001-of-00002.gguf': { size: 5_000_000_000, sha256: 'c'.repeat(64) },
                'Big-Q8_0-00002-of-00002.gguf': { size: 3_540_000_000, sha256: 'd'.repeat(64) },
                'mmproj-Big-F16.gguf': { size: 600_000_000, sha256: 'e'.repeat(64) },
              },
            },
          },
        },
        'meta-llama/Llama-3.1-8B': {
          gated: true,
          files: { 'config.json': config, 'model.safetensors': Buffer.from('w') },
        },
        'google/gemma-2-9b': {
          gated: true,
          granted: ['hf_someoneElse'],
          files: { 'config.json': config, 'model.safetensors': Buffer.from('w') },
        },
      },
    });
    plain = http.createServer((req, res) => {
      plainAuth.push(req.headers.authorization);
      if (req.url === '/missing.gguf') res.writeHead(404).end();
      else if (req.url === '/nolength') res.writeHead(200, { 'transfer-encoding': 'chunked' }).end();
      else res.writeHead(200, { 'content-length': 1234, etag: '"v1"' }).end();
    });
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    plainUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`;
    opts = { fetch, endpoint: hub.url };
  });
  afterAll(async () => {
    await hub.close();
    await new Promise((r) => plain.close(r));
  });

  it('pins a safetensors repository to its commit, with the shards its index names and no consolidated file', async () => {
    const origin = await resolveOrigin('hf://Qwen/Qwen2.5-7B-Instruct', opts);
    expect(origin).toMatchObject({
      kind: 'hf',
      repo: 'Qwen/Qwen2.5-7B-Instruct',
      revision: 'main',
      commit: '1'.repeat(40),
    });
    expect(origin.files.map((f) => f.path)).toEqual([
      'config.json',
      'generation_config.json',
      'tokenizer_config.json',
      'tokenizer.json',
      'model.safetensors.index.json',
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
    ]);
    expect(origin.files.find((f) => f.path === 'model-00002-of-00002.safetensors')).toEqual({
      path: 'model-00002-of-00002.safetensors',
      size: shard2.length,
      sha256: sha(shard2),
    });
    expect(origin.files[0]).toMatchObject({
      path: 'config.json',
      size: config.length,
      etag: expect.stringMatching(/^[0-9a-f]{40}$/),
    });
    // The listing came in pages (3 entries each), followed by their Link headers, at the commit.
    const pages = hub.requests.filter((r) => r.url.includes('/tree/'));
    expect(pages.length).toBeGreaterThan(2);
    expect(pages.every((r) => r.url.includes(`/tree/${'1'.repeat(40)}`))).toBe(true);
  });

  it('brings every part of a split GGUF and the mmproj, at a named revision', async () => {
    const origin = await resolveOrigin('hf://bartowski/Big-GGUF/Big-Q8_0-00001-of-00002.gguf@v2', opts);
    expect(origin).toMatchObject({ revision: 'v2', commit: '2'.repeat(40) });
    expect(origin.files).toEqual([
      { path: 'Big-Q8_0-00001-of-00002.gguf', size: 5_000_000_000, sha256: 'c'.repeat(64) },
      { path: 'Big-Q8_0-00002-of-00002.gguf', size: 3_540_000_000, sha256: 'd'.repeat(64) },
      { path: 'mmproj-Big-F16.gguf', size: 600_000_000, sha256: 'e'.repeat(64) },
    ]);
  });

  it.each([
    [
      'hf://bartowski/Big-GGUF',
      'invalid_argument',
      'hf://bartowski/Big-GGUF holds GGUF files: name one file: hf://bartowski/Big-GGUF/FILE; this repository has: ' +
        'Big-Q4_K_M.gguf (4.7 GB), Big-Q8_0.gguf (8.5 GB)',
    ],
    [
      'hf://bartowski/Big-GGUF/Big-Q2_K.gguf',
      'not_found',
      `hf://bartowski/Big-GGUF has no file Big-Q2_K.gguf at main (commit ${createHash('sha1').update('bartowski/Big-GGUF@main').digest('hex')})`,
    ],
    [
      'hf://bartowski/Big-GGUF@v9',
      'not_found',
      'bartowski/Big-GGUF has no revision v9 (no branch, tag or commit of that name): check hf://bartowski/Big-GGUF@v9',
    ],
    [
      'hf://nobody/nothing',
      'not_found',
      'HUB has no repository nobody/nothing: check the name in hf://nobody/nothing (a private one needs hub.token)',
    ],
    [
      'hf://meta-llama/Llama-3.1-8B',
      'precondition_failed',
      'hf://meta-llama/Llama-3.1-8B is a gated repository: set hub.token (or HF_TOKEN) to a token of an account that was granted access at HUB/meta-llama/Llama-3.1-8B',
    ],
  ])('refuses %s in words', async (source, code, message) => {
    const want = message.replace('HUB', hub.url).replace('HUB', hub.url);
    const wantText = want.startsWith(hub.url) ? `the hub at ${want}` : want;
    await expect(resolveOrigin(source, opts)).rejects.toMatchObject({ code, message: wantText });
  });

  it('sends the token to the hub only, and resolves a gated repository with it', async () => {
    hub.requests.length = 0;
    const origin = await resolveOrigin('hf://meta-llama/Llama-3.1-8B', { ...opts, token });
    expect(origin.files.map((f) => f.path)).toEqual(['config.json', 'model.safetensors']);
    expect(hub.requests.length).toBeGreaterThan(0);
    expect(hub.requests.every((r) => r.authorization === `Bearer ${token}`)).toBe(true);

    const url = await resolveOrigin(`${plainUrl}/dir/model.gguf`, { ...opts, token });
    expect(url).toEqual({
      source: `${plainUrl}/dir/model.gguf`,
      kind: 'url',
      revision: '"v1"',
      files: [{ path: 'model.gguf', size: 1234, etag: '"v1"' }],
    });
    expect(plainAuth).toEqual([undefined]);
  });

  it('says a token without access to a gated repository has none, without the token', async () => {
    const err = await resolveOrigin('hf://google/gemma-2-9b', { ...opts, token }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'precondition_failed',
      message: `hf://google/gemma-2-9b is a gated repository and the account of hub.token has no access to it: ask for access at ${hub.url}/google/gemma-2-9b`,
    });
    expect((err as Error).message).not.toContain(token);
  });

  it('refuses a URL that does not say its size', async () => {
    await expect(resolveOrigin(`${plainUrl}/nolength`, opts)).rejects.toMatchObject({
      code: 'unavailable',
      message: `${plainUrl}/nolength did not say its size (no Content-Length): llmgw needs it to plan`,
    });
  });

  it('says an unreachable hub could not be reached, at which address, without the token', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const err = await resolveOrigin('hf://org/repo', {
      fetch,
      endpoint: `http://127.0.0.1:${port}`,
      token,
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable' });
    const message = (err as Error).message;
    expect(message).toMatch(
      new RegExp(
        `^the hub at http://127\\.0\\.0\\.1:${port} could not be reached \\(.*ECONNREFUSED.*\\) while resolving hf://org/repo: check hub.endpoint \\(or HF_ENDPOINT\\) and the network$`,
      ),
    );
    expect(message).not.toContain(token);
  });

  it('refuses a URL that is not there', async () => {
    await expect(resolveOrigin(`${plainUrl}/missing.gguf`, opts)).rejects.toMatchObject({
      code: 'not_found',
      message: `${plainUrl}/missing.gguf answered 404 Not Found: there is no file there`,
    });
  });

  it("lists a local model's folder with sizes, and refuses a path that is not there or not a model", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'llmgw-source-'));
    try {
      const weights = writeSafetensors([{ name: 'w', dtype: 'F16', shape: [2], bytes: 4 }]);
      await mkdir(join(dir, 'sub'));
      await mkdir(join(dir, '.cache'));
      await writeFile(join(dir, 'config.json'), '{}');
      await writeFile(join(dir, 'model.safetensors'), weights);
      await writeFile(join(dir, 'sub', 'notes.txt'), 'x'.repeat(10));
      await writeFile(join(dir, '.cache', 'x'), 'x');
      expect(await resolveOrigin(dir, opts)).toEqual({
        source: dir,
        kind: 'path',
        revision: '',
        files: [
          { path: 'config.json', size: 2 },
          { path: 'model.safetensors', size: weights.length },
          { path: 'sub/notes.txt', size: 10 },
        ],
      });
      await expect(resolveOrigin(join(dir, 'config.json'), opts)).rejects.toMatchObject({
        code: 'invalid_argument',
        message: `${join(dir, 'config.json')} is neither a GGUF file (it would start with the bytes GGUF) nor a safetensors file (an 8-byte header length, then a JSON header): a local source is a model: a GGUF file, a safetensors file, or a folder with a config.json and weights`,
      });
      await expect(resolveOrigin(join(dir, 'nope'), opts)).rejects.toMatchObject({
        code: 'not_found',
        message: `there is no file or directory at ${join(dir, 'nope')}: check the path`,
      });
      await expect(
        resolveOrigin(dir, { ...opts, own: [{ path: dir, what: 'the data dir' }] }),
      ).rejects.toMatchObject({
        code: 'invalid_argument',
        message: `${dir} is the data dir: llmgw never serves its own data; point source at a model's file or folder`,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('does not send the token to a next page on another origin', async () => {
    const seen: [string, string | undefined][] = [];
    const reply = (body: unknown, headers: Record<string, string> = {}) =>
      new Response(JSON.stringify(body), { status: 200, headers });
    const stub = (url: string, init?: { headers?: Record<string, string> }) => {
      seen.push([new URL(url).origin, init?.headers?.['authorization']]);
      if (url.includes('/revision/')) return Promise.resolve(reply({ sha: '3'.repeat(40) }));
      if (url.startsWith('http://hub.test/')) {
        return Promise.resolve(reply([], { link: '<http://elsewhere.test/page2>; rel="next"' }));
      }
      return Promise.resolve(
        reply([
          { type: 'file', path: 'config.json', size: 2, oid: 'o' },
          {
            type: 'file',
            path: 'model.safetensors',
            size: 9,
            oid: 'p',
            lfs: { oid: 'f'.repeat(64), size: 9 },
          },
        ]),
      );
    };
    const origin = await resolveOrigin('hf://org/repo', { fetch: stub, endpoint: 'http://hub.test', token });
    expect(origin.files).toEqual([
      { path: 'config.json', size: 2, etag: 'o' },
      { path: 'model.safetensors', size: 9, sha256: 'f'.repeat(64) },
    ]);
    expect(seen).toEqual([
      ['http://hub.test', `Bearer ${token}`],
      ['http://hub.test', `Bearer ${token}`],
      ['http://elsewhere.test', undefined],
    ]);
  });

  it('says what a failing hub answered, with the token taken out', async () => {
    const stub = () =>
      Promise.resolve(
        new Response(`upstream broke for ${token}`, { status: 502, statusText: 'Bad Gateway' }),
      );
    await expect(
      resolveOrigin('hf://org/repo', { fetch: stub, endpoint: 'http://hub.test/', token }),
    ).rejects.toMatchObject({
      code: 'unavailable',
      message:
        'the hub at http://hub.test answered 502 Bad Gateway while resolving hf://org/repo: upstream broke for [token]',
    });
    const odd = () => Promise.resolve(new Response('{"sha":"not-a-commit"}', { status: 200 }));
    await expect(
      resolveOrigin('hf://org/repo', { fetch: odd, endpoint: 'http://hub.test' }),
    ).rejects.toMatchObject({
      code: 'unavailable',
      message: 'the hub at http://hub.test answered a revision of org/repo llmgw cannot read',
    });
  });
});
