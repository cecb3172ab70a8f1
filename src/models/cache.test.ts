import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { serveRanges, type RangeServer } from '../../test/fakes/files/range-server.js';
import { evictCache, listCache, purgeOrigin } from './cache.js';
import { blobKey } from './cache-layout.js';
import { ModelFetcher } from './model-fetcher.js';
import type { Origin } from './origin.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const c1 = '1'.repeat(40);
const c2 = '2'.repeat(40);

let dirs: string[] = [];
let servers: RangeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
  servers = [];
});

function tempRoot(): string {
  const d = mkdtempSync(join(tmpdir(), 'llmgw-cache-'));
  dirs.push(d);
  return d;
}

/** Writes a cache the way huggingface_hub does: blobs, relative links in snapshots, refs. */
function hubRepo(
  root: string,
  repo: string,
  snapshots: Record<string, Record<string, string>>,
  blobs: Record<string, { bytes: number; at: number }>,
  refs: Record<string, string> = {},
): string {
  const dir = join(root, `models--${repo.replace('/', '--')}`);
  mkdirSync(join(dir, 'blobs'), { recursive: true });
  for (const [key, b] of Object.entries(blobs)) {
    const p = join(dir, 'blobs', key);
    writeFileSync(p, Buffer.alloc(b.bytes, 1));
    utimesSync(p, b.at, b.at);
  }
  for (const [commit, files] of Object.entries(snapshots)) {
    for (const [path, key] of Object.entries(files)) {
      const p = join(dir, 'snapshots', commit, ...path.split('/'));
      mkdirSync(join(p, '..'), { recursive: true });
      symlinkSync(`${'../'.repeat(path.split('/').length + 1)}blobs/${key}`, p);
    }
  }
  for (const [name, commit] of Object.entries(refs)) {
    mkdirSync(join(dir, 'refs'), { recursive: true });
    writeFileSync(join(dir, 'refs', name), commit);
  }
  return dir;
}

const key = (c: string) => c.repeat(64);

describe('listCache', () => {
  it('reads a cache made by huggingface_hub', async () => {
    const root = tempRoot();
    const dir = hubRepo(
      root,
      'meta-llama/Llama-3.2-1B',
      {
        [c1]: {
          'config.json': 'a'.repeat(40),
          'model.safetensors': key('b'),
          'original/params.json': 'c'.repeat(40),
        },
        [c2]: { 'config.json': 'a'.repeat(40) },
      },
      {
        ['a'.repeat(40)]: { bytes: 800, at: 1_700_000_000 },
        [key('b')]: { bytes: 5000, at: 1_700_000_100 },
        ['c'.repeat(40)]: { bytes: 200, at: 1_700_000_050 },
      },
      { main: c1 },
    );
    // What else huggingface_hub leaves: files it found missing, locks, and other kinds of repositories.
    mkdirSync(join(dir, '.no_exist', c1), { recursive: true });
    writeFileSync(join(dir, '.no_exist', c1, 'generation_config.json'), '');
    mkdirSync(join(root, '.locks', 'models--meta-llama--Llama-3.2-1B'), { recursive: true });
    mkdirSync(join(root, 'datasets--org--data', 'blobs'), { recursive: true });
    writeFileSync(join(root, 'version.txt'), '1');
    writeFileSync(join(dir, 'blobs', `${key('d')}.incomplete`), Buffer.alloc(3000, 1));
    const snap1 = join(dir, 'snapshots', c1);
    utimesSync(snap1, 1_800_000_000, 1_800_000_000);

    const listing = await listCache(root, {
      modelsByBlob: new Map([
        [key('b'), ['llama-1b']],
        ['a'.repeat(40), ['llama-1b', 'other']],
      ]),
      lastUsed: new Map([[snap1, Date.parse('2025-01-02T03:04:05Z')]]),
    });
    expect(listing).toEqual([
      {
        source: 'hf://meta-llama/Llama-3.2-1B',
        snapshot: c1,
        models: ['llama-1b', 'other'],
        files: 3,
        bytes: 6000,
        last_used: '2025-01-02T03:04:05.000Z',
        incomplete_bytes: 3000,
        snapshotDir: snap1,
      },
      {
        source: 'hf://meta-llama/Llama-3.2-1B',
        snapshot: c2,
        models: ['llama-1b', 'other'],
        files: 1,
        bytes: 800,
        // Never started: when its files were fetched.
        last_used: new Date(1_700_000_000 * 1000).toISOString(),
        snapshotDir: join(dir, 'snapshots', c2),
      },
    ]);
  });

  it('reads a cache made by ModelFetcher, a URL origin under its address', async () => {
    const bytes = randomBytes(5000);
    const server = await serveRanges({ '/m.gguf': bytes });
    servers.push(server);
    const root = tempRoot();
    const origin: Origin = {
      source: server.url('/m.gguf'),
      kind: 'url',
      revision: '"etag-1"',
      files: [{ path: 'm.gguf', size: bytes.length, etag: '"etag-1"' }],
    };
    const r = await new ModelFetcher({ root }).ensure(origin, () => ({ url: origin.source })).done;
    const listing = await listCache(root, {
      modelsByBlob: new Map([[blobKey(origin, origin.files[0]!), ['tiny']]]),
    });
    expect(listing).toEqual([
      expect.objectContaining({
        source: server.url('/m.gguf'),
        models: ['tiny'],
        files: 1,
        bytes: 5000,
        snapshotDir: r.snapshotDir,
      }),
    ]);
    expect(listing[0]?.incomplete_bytes).toBeUndefined();
  });

  it('lists nothing for a root that does not exist', async () => {
    expect(await listCache(join(tempRoot(), 'none'))).toEqual([]);
  });
});

describe('evictCache', () => {
  /**
   * Five blobs in two repositories, 1000 bytes each, fetched at t=1..5 (blob "1" oldest):
   *   org/a @c1: x -> 1, y -> 2;  org/a @c2: x -> 1, z -> 3;  org/b @c1: w -> 4, v -> 5
   */
  function fiveBlobs(root: string) {
    hubRepo(
      root,
      'org/a',
      { [c1]: { x: key('1'), y: key('2') }, [c2]: { x: key('1'), 'sub/z': key('3') } },
      {
        [key('1')]: { bytes: 1000, at: 1 },
        [key('2')]: { bytes: 1000, at: 2 },
        [key('3')]: { bytes: 1000, at: 3 },
      },
      { main: c2, old: c1 },
    );
    hubRepo(
      root,
      'org/b',
      { [c1]: { w: key('4'), v: key('5') } },
      {
        [key('4')]: { bytes: 1000, at: 4 },
        [key('5')]: { bytes: 1000, at: 5 },
      },
    );
  }

  const cases: {
    name: string;
    maxBytes: number;
    catalog?: string[];
    inUse?: string[];
    lastUsed?: [string, string, number][];
    removed: string[];
    still_over?: number;
  }[] = [
    { name: 'under the bound: nothing', maxBytes: 5000, removed: [] },
    { name: 'least recently fetched first', maxBytes: 3500, removed: ['1', '2'] },
    {
      name: 'blobs of no catalog model before catalog ones',
      maxBytes: 2000,
      catalog: ['1', '2', '4'],
      removed: ['3', '5', '1'],
    },
    {
      name: 'never a blob in use',
      maxBytes: 2000,
      inUse: ['1', '2'],
      removed: ['3', '4', '5'],
      still_over: 0,
    },
    {
      name: 'an engine started on a snapshot makes its blobs recent',
      maxBytes: 3000,
      lastUsed: [['org/a', c1, 10]],
      removed: ['3', '4'],
    },
    {
      name: 'in use everywhere: says how much is still over',
      maxBytes: 1000,
      inUse: ['1', '2', '3', '4'],
      removed: ['5'],
      still_over: 3000,
    },
  ];

  for (const c of cases) {
    it(`evicts in order: ${c.name}`, async () => {
      const root = tempRoot();
      fiveBlobs(root);
      const repoDir = (r: string) => join(root, `models--${r.replace('/', '--')}`);
      const result = await evictCache(root, {
        maxBytes: c.maxBytes,
        inUse: new Set((c.inUse ?? []).map(key)),
        catalogBlobs: new Set((c.catalog ?? []).map(key)),
        lastUsed: new Map(
          (c.lastUsed ?? []).map(([r, commit, at]) => [join(repoDir(r), 'snapshots', commit), at * 1000]),
        ),
      });
      expect(result.removed.map((r) => r.blob.replace(/^.*\/blobs\/(.).*$/, '$1'))).toEqual(c.removed);
      expect(result.freed).toBe(c.removed.length * 1000);
      if (c.still_over !== undefined && c.still_over > 0) expect(result.still_over).toBe(c.still_over);
      else expect(result.still_over).toBeUndefined();
    });
  }

  it('removes the links to removed blobs, snapshot folders left empty, their refs, and an emptied repository', async () => {
    const root = tempRoot();
    fiveBlobs(root);
    const a = join(root, 'models--org--a');
    // 1 and 3 go: @c2 is left empty, @c1 keeps y.
    const r = await evictCache(root, {
      maxBytes: 3000,
      inUse: new Set([key('2')]),
      catalogBlobs: new Set([key('4'), key('5')]),
    });
    expect(r.removed.map((x) => x.blob)).toEqual([
      `models--org--a/blobs/${key('1')}`,
      `models--org--a/blobs/${key('3')}`,
    ]);
    expect(readdirSync(join(a, 'snapshots'))).toEqual([c1]);
    expect(readdirSync(join(a, 'snapshots', c1))).toEqual(['y']);
    expect(readdirSync(join(a, 'refs'))).toEqual(['old']);
    const all = await evictCache(root, { maxBytes: 0, inUse: new Set(), catalogBlobs: new Set() });
    expect(all.still_over).toBeUndefined();
    expect(readdirSync(root)).toEqual([]);
  });
});

describe('purgeOrigin', () => {
  it('removes its snapshot and blobs, keeping those another snapshot or a running engine uses, and says why', async () => {
    const root = tempRoot();
    const shared = randomBytes(100);
    const mine = randomBytes(200);
    const busy = randomBytes(300);
    const dir = hubRepo(
      root,
      'org/a',
      { [c1]: { s: sha256(shared), m: sha256(mine), b: sha256(busy) }, [c2]: { s: sha256(shared) } },
      {
        [sha256(shared)]: { bytes: 100, at: 1 },
        [sha256(mine)]: { bytes: 200, at: 1 },
        [sha256(busy)]: { bytes: 300, at: 1 },
      },
      { main: c1, v2: c2 },
    );
    // A file of the origin still being fetched.
    const partial = randomBytes(50);
    writeFileSync(join(dir, 'blobs', `${sha256(partial)}.incomplete`), partial);
    const origin: Origin = {
      source: 'hf://org/a',
      kind: 'hf',
      repo: 'org/a',
      revision: 'main',
      commit: c1,
      files: [
        { path: 's', size: 100, sha256: sha256(shared) },
        { path: 'm', size: 200, sha256: sha256(mine) },
        { path: 'b', size: 300, sha256: sha256(busy) },
        { path: 'p', size: 999, sha256: sha256(partial) },
      ],
    };
    const r = await purgeOrigin(root, origin, new Set([sha256(busy)]));
    const blob = (b: Buffer) => `models--org--a/blobs/${sha256(b)}`;
    expect(r.removed).toEqual([
      { path: blob(mine), bytes: 200 },
      { path: `${blob(partial)}.incomplete`, bytes: 50 },
    ]);
    expect(r.kept).toEqual([
      { path: blob(shared), reason: `snapshot ${c2} uses it too` },
      { path: blob(busy), reason: 'a running engine or download uses it' },
    ]);
    expect(r.freed).toBe(250);
    expect(existsSync(join(dir, 'snapshots', c1))).toBe(false);
    expect(readdirSync(join(dir, 'refs'))).toEqual(['v2']);
    expect((await listCache(root)).map((l) => l.snapshot)).toEqual([c2]);
  });
});
