import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, patternBytes, startFakeHub } from './hub.js';

const config = Buffer.from('{"architectures":["LlamaForCausalLM"]}');
const weights = patternBytes(1000);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('fake hub', () => {
  let hub: FakeHub;
  beforeAll(async () => {
    hub = await startFakeHub({
      pageSize: 2,
      repos: {
        'org/model': {
          commit: 'a'.repeat(40),
          files: {
            'config.json': config,
            'model.safetensors': weights,
            'original/consolidated.00.pth': { size: 5_000_000_000, sha256: 'b'.repeat(64) },
          },
          revisions: { v1: { commit: 'c'.repeat(40), files: { 'config.json': config } } },
        },
        'org/gated': { gated: true, files: { 'model.gguf': patternBytes(10) } },
        'org/granted': { gated: true, granted: ['hf_yes'], files: { 'model.gguf': patternBytes(10) } },
      },
    });
  });
  afterAll(() => hub.close());

  it('lists the tree in pages linked by a Link header, with LFS sha256 and pointer sizes', async () => {
    const items: Record<string, unknown>[] = [];
    let next: string | undefined = `${hub.url}/api/models/org/model/tree/main?recursive=true&expand=true`;
    let pages = 0;
    while (next !== undefined) {
      const res: Response = await fetch(next);
      expect(res.status).toBe(200);
      items.push(...((await res.json()) as Record<string, unknown>[]));
      next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
      pages++;
    }
    expect(pages).toBe(2);
    expect(items.map((i) => [i['type'], i['path']])).toEqual([
      ['file', 'config.json'],
      ['file', 'model.safetensors'],
      ['directory', 'original'],
      ['file', 'original/consolidated.00.pth'],
    ]);
    const st = items.find((i) => i['path'] === 'model.safetensors');
    expect(st).toMatchObject({ size: 1000, lfs: { oid: sha(weights), size: 1000 } });
    expect((st?.['lfs'] as { pointerSize: number }).pointerSize).toBeGreaterThan(100);
    const cfg = items.find((i) => i['path'] === 'config.json');
    expect(cfg?.['lfs']).toBeUndefined();
    expect(cfg?.['oid']).toBe(
      createHash('sha1').update(`blob ${config.length}\0`).update(config).digest('hex'),
    );
  });

  it('answers the revision info with its commit, by branch, tag or commit', async () => {
    const main = (await (await fetch(`${hub.url}/api/models/org/model/revision/main`)).json()) as {
      sha: string;
    };
    expect(main.sha).toBe('a'.repeat(40));
    const v1 = (await (await fetch(`${hub.url}/api/models/org/model/revision/v1`)).json()) as { sha: string };
    expect(v1.sha).toBe('c'.repeat(40));
    const byCommit = await fetch(`${hub.url}/api/models/org/model/revision/${'c'.repeat(40)}`);
    expect(byCommit.status).toBe(200);
  });

  it('resolves a small file directly and an LFS file by a redirect to a file server with ranges', async () => {
    const small = await fetch(`${hub.url}/org/model/resolve/main/config.json`, { method: 'HEAD' });
    expect(small.status).toBe(200);
    expect(small.headers.get('x-repo-commit')).toBe('a'.repeat(40));
    expect(small.headers.get('content-length')).toBe(String(config.length));

    const head = await fetch(`${hub.url}/org/model/resolve/main/model.safetensors`, {
      method: 'HEAD',
      redirect: 'manual',
    });
    expect(head.status).toBe(302);
    expect(head.headers.get('x-linked-etag')).toBe(`"${sha(weights)}"`);
    expect(head.headers.get('x-linked-size')).toBe('1000');
    expect(head.headers.get('x-repo-commit')).toBe('a'.repeat(40));
    expect(head.headers.get('etag')).toMatch(/^"[0-9a-f]{40}"$/);
    const location = head.headers.get('location') ?? '';
    expect(location).toContain('/lfs-files/');

    const part = await fetch(location, { headers: { range: 'bytes=10-19' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 10-19/1000');
    expect(Buffer.from(await part.arrayBuffer())).toEqual(weights.subarray(10, 20));

    const whole = await fetch(`${hub.url}/org/model/resolve/main/model.safetensors`);
    expect(sha(Buffer.from(await whole.arrayBuffer()))).toBe(sha(weights));
  });

  it('refuses a gated repository without a token and serves it with one', async () => {
    const res = await fetch(`${hub.url}/org/gated/resolve/main/model.gguf`, {
      method: 'HEAD',
      redirect: 'manual',
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('x-error-code')).toBe('GatedRepo');
    const ok = await fetch(`${hub.url}/org/gated/resolve/main/model.gguf`, {
      method: 'HEAD',
      redirect: 'manual',
      headers: { authorization: 'Bearer hf_abc' },
    });
    expect(ok.status).toBe(302);
    expect(hub.requests.at(-1)?.authorization).toBe('Bearer hf_abc');
  });

  it('answers 403 GatedRepo to a token not granted access', async () => {
    const head = (token: string) =>
      fetch(`${hub.url}/org/granted/resolve/main/model.gguf`, {
        method: 'HEAD',
        redirect: 'manual',
        headers: { authorization: `Bearer ${token}` },
      });
    const no = await head('hf_no');
    expect(no.status).toBe(403);
    expect(no.headers.get('x-error-code')).toBe('GatedRepo');
    expect((await head('hf_yes')).status).toBe(302);
  });

  it('answers suffix ranges and refuses ranges past the end with 416', async () => {
    const loc = `${hub.url}/lfs-files/${sha(weights)}`;
    const tail = await fetch(loc, { headers: { range: 'bytes=-5' } });
    expect(tail.status).toBe(206);
    expect(tail.headers.get('content-range')).toBe('bytes 995-999/1000');
    expect(Buffer.from(await tail.arrayBuffer())).toEqual(weights.subarray(995));
    const past = await fetch(loc, { headers: { range: 'bytes=1000-' } });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe('bytes */1000');
  });

  it.each([
    ['/api/models/org/none/revision/main', 'RepoNotFound', 'Repository not found'],
    ['/api/models/org/model/revision/nope', 'RevisionNotFound', 'Invalid rev id: nope'],
    ['/api/models/org/model/tree/nope?recursive=true', 'RevisionNotFound', 'Invalid rev id: nope'],
    ['/org/model/resolve/main/missing.json', 'EntryNotFound', 'Entry not found'],
  ])('answers %s with 404 %s', async (path, code, message) => {
    const res = await fetch(`${hub.url}${path}`);
    expect(res.status).toBe(404);
    expect(res.headers.get('x-error-code')).toBe(code);
    expect(await res.json()).toEqual({ error: message });
  });
});
