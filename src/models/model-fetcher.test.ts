import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { serveRanges, type Plan, type RangeServer } from '../../test/fakes/files/range-server.js';
import { startFakeHub, type FakeHub } from '../../test/fakes/hub/hub.js';
import { filePaths, hubFileUrl, incompletePath, originLayout } from './cache-layout.js';
import { ModelFetcher } from './model-fetcher.js';
import type { Origin } from './origin.js';
import { until } from '../../test/support/timing.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const gitSha1 = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
const commit = 'c'.repeat(40);
const otherCommit = 'd'.repeat(40);

const config = Buffer.from('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}\n');
const weights = randomBytes(200_000);
const tokenizer = randomBytes(30_000);

function hfOrigin(files: Origin['files'], at = commit, revision = 'main'): Origin {
  return { source: 'hf://org/tiny', kind: 'hf', repo: 'org/tiny', revision, commit: at, files };
}
const files = {
  config: { path: 'config.json', size: config.length, etag: gitSha1(config) },
  weights: { path: 'model.safetensors', size: weights.length, sha256: sha256(weights) },
  tokenizer: { path: 'sub/tokenizer.model', size: tokenizer.length, sha256: sha256(tokenizer) },
};

let hubs: FakeHub[] = [];
let servers: RangeServer[] = [];
let dirs: string[] = [];
afterEach(async () => {
  await Promise.all([...hubs.map((h) => h.close()), ...servers.map((s) => s.close())]);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  hubs = [];
  servers = [];
  dirs = [];
});

function tempRoot(): string {
  const d = mkdtempSync(join(tmpdir(), 'llmgw-fetcher-'));
  dirs.push(d);
  return join(d, 'cache');
}

async function hub(): Promise<FakeHub> {
  const h = await startFakeHub({
    repos: {
      'org/tiny': {
        commit,
        files: { 'config.json': config, 'model.safetensors': weights, 'sub/tokenizer.model': tokenizer },
        revisions: {
          v2: { commit: otherCommit, files: { 'config.json': config, 'model.safetensors': weights } },
        },
      },
    },
  });
  hubs.push(h);
  return h;
}

const fromHub = (h: FakeHub, origin: Origin) => (file: Origin['files'][number]) => ({
  url: hubFileUrl(h.url, origin, file),
  headers: { authorization: 'Bearer hf_test_token' },
});

/** Requests for a file's bytes, per path (the hub's resolve, and its LFS file server). */
function fetchesPerFile(h: FakeHub): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of h.requests) {
    const key = r.url.replace(/^.*\/resolve\/[0-9a-f]+\//, '').replace(/^\/lfs-files\/.*/, 'lfs');
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

describe('ModelFetcher', () => {
  it('fetches every file into blobs, links the snapshot relatively, and writes the ref', async () => {
    const h = await hub();
    const root = tempRoot();
    const origin = hfOrigin([files.config, files.weights, files.tokenizer]);
    const fetcher = new ModelFetcher({ root, fetchDefaults: { retryBaseMs: 5 } });
    const job = fetcher.ensure(origin, fromHub(h, origin));
    const result = await job.done;
    const layout = originLayout(root, origin)!;
    expect(result.snapshotDir).toBe(join(root, 'models--org--tiny', 'snapshots', commit));
    expect(result.paths).toEqual({
      'config.json': join(result.snapshotDir, 'config.json'),
      'model.safetensors': join(result.snapshotDir, 'model.safetensors'),
      'sub/tokenizer.model': join(result.snapshotDir, 'sub', 'tokenizer.model'),
    });
    for (const [file, bytes] of [
      [files.config, config],
      [files.weights, weights],
      [files.tokenizer, tokenizer],
    ] as const) {
      const p = filePaths(layout, origin, file);
      expect(readlinkSync(p.snapshot)).toBe(p.link);
      expect(p.link.startsWith('../')).toBe(true);
      expect(realpathSync(p.snapshot)).toBe(realpathSync(p.blob));
      expect(readFileSync(p.snapshot).equals(bytes)).toBe(true);
    }
    expect(readlinkSync(join(result.snapshotDir, 'sub', 'tokenizer.model'))).toBe(
      `../../../blobs/${files.tokenizer.sha256}`,
    );
    expect(readFileSync(join(root, 'models--org--tiny', 'refs', 'main'), 'utf8')).toBe(commit);
    expect(job.state).toBe('done');
    expect(job.progress()).toEqual({
      done: job.progress().total,
      total: config.length + weights.length + tokenizer.length,
      rate_bps: 0,
    });
    // The token went to the hub (same origin here).
    expect(h.requests.every((r) => r.authorization === 'Bearer hf_test_token')).toBe(true);
  });

  it('fetches each file once for two concurrent ensure() of one origin, and not at all once present', async () => {
    const h = await hub();
    const root = tempRoot();
    const origin = hfOrigin([files.config, files.weights]);
    const fetcher = new ModelFetcher({ root });
    const a = fetcher.ensure(origin, fromHub(h, origin));
    const b = fetcher.ensure(origin, fromHub(h, origin));
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect(ra).toEqual(rb);
    expect(fetchesPerFile(h)).toEqual({ 'config.json': 1, 'model.safetensors': 1, lfs: 1 });
    await fetcher.ensure(origin, fromHub(h, origin)).done;
    expect(h.requests).toHaveLength(3);
  });

  it('joins the running download of a blob another origin shares, and a cancelled job leaves it to the other', async () => {
    const bytes = randomBytes(400_000);
    let stalled = false;
    const server = await serveRanges({ '/w': bytes, '/c': config }, (r) => {
      if (r.path !== '/w' || stalled) return undefined;
      stalled = true;
      return { stallAfter: 100_000 };
    });
    servers.push(server);
    const root = tempRoot();
    const weightsFile = { path: 'model.safetensors', size: bytes.length, sha256: sha256(bytes) };
    const v1 = hfOrigin([weightsFile]);
    const v2 = hfOrigin([files.config, weightsFile], otherCommit, 'v2');
    const fetcher = new ModelFetcher({ root, fetchDefaults: { stallMs: 300, retryBaseMs: 5 } });
    const where = (f: { path: string }) => ({ url: server.url(f.path === 'config.json' ? '/c' : '/w') });
    const a = fetcher.ensure(v1, where);
    const b = fetcher.ensure(v2, where);
    await until('the second file under way', () => b.progress().done >= 100_000 + config.length);
    a.cancel();
    await expect(a.done).rejects.toThrow(/fetching hf:\/\/org\/tiny was cancelled/);
    expect(a.state).toBe('failed');
    expect(a.error).toBe('cancelled');
    const r = await b.done;
    expect(readFileSync(r.paths['model.safetensors']!).equals(bytes)).toBe(true);
    // One download of the blob: the first request stalled, the retry continued it.
    expect(server.requests.filter((q) => q.path === '/w').map((q) => q.range)).toEqual([
      undefined,
      'bytes=100000-',
    ]);
    expect(readFileSync(join(root, 'models--org--tiny', 'refs', 'v2'), 'utf8')).toBe(otherCommit);
  });

  it('takes a file placed by hand in the snapshot when its digest matches, and fetches one that does not', async () => {
    const h = await hub();
    const root = tempRoot();
    const origin = hfOrigin([files.config, files.weights]);
    const layout = originLayout(root, origin)!;
    mkdirSync(layout.snapshotDir, { recursive: true });
    writeFileSync(join(layout.snapshotDir, 'model.safetensors'), weights);
    const wrong = Buffer.from(config);
    wrong[3] = 0x21;
    writeFileSync(join(layout.snapshotDir, 'config.json'), wrong);
    const result = await new ModelFetcher({ root }).ensure(origin, fromHub(h, origin)).done;
    expect(fetchesPerFile(h)).toEqual({ 'config.json': 1 });
    expect(lstatSync(result.paths['model.safetensors']!).isFile()).toBe(true);
    expect(lstatSync(result.paths['config.json']!).isSymbolicLink()).toBe(true);
    expect(readFileSync(result.paths['config.json']!).equals(config)).toBe(true);
  });

  it('refuses a disk too small before fetching, saying what it needs, what is free and where', async () => {
    const h = await hub();
    const root = tempRoot();
    const origin = hfOrigin([files.config, files.weights]);
    const fetcher = new ModelFetcher({ root, freeBytes: () => Promise.resolve(150_000) });
    const job = fetcher.ensure(origin, fromHub(h, origin));
    await expect(job.done).rejects.toThrow(
      `hf://org/tiny needs 200 kB more on disk, and 150 kB is free at ${root}: free space there, set agent.models.max_gb lower so the cache keeps less, or choose a smaller model`,
    );
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/needs 200 kB more on disk/);
    expect(h.requests).toHaveLength(0);
  });

  it('counts the bytes of a partial file as already there', async () => {
    const h = await hub();
    const root = tempRoot();
    const origin = hfOrigin([files.weights]);
    const { blob } = filePaths(originLayout(root, origin)!, origin, files.weights);
    mkdirSync(join(blob, '..'), { recursive: true });
    writeFileSync(incompletePath(blob), weights.subarray(0, 120_000));
    const fetcher = new ModelFetcher({ root, freeBytes: () => Promise.resolve(80_000) });
    await fetcher.ensure(origin, fromHub(h, origin)).done;
    expect(h.requests.map((r) => r.range)).toEqual(['bytes=120000-', 'bytes=120000-']);
  });

  async function corrupting(plan: (i: number) => Plan | undefined) {
    const server = await serveRanges({ '/w': weights }, (_r, i) => plan(i));
    servers.push(server);
    const root = tempRoot();
    const origin = hfOrigin([files.weights]);
    const job = new ModelFetcher({ root }).ensure(origin, () => ({ url: server.url('/w') }));
    return { server, job };
  }

  it('fetches a file whose digest did not match once more', async () => {
    const bad = Buffer.from(weights);
    bad[7] = (bad[7] ?? 0) ^ 0x80;
    const { server, job } = await corrupting((i) => (i === 0 ? { body: bad } : undefined));
    const r = await job.done;
    expect(readFileSync(r.paths['model.safetensors']!).equals(weights)).toBe(true);
    expect(server.requests).toHaveLength(2);
  });

  it('fails on a second mismatch, with the digests', async () => {
    const bad = Buffer.from(weights);
    bad[7] = (bad[7] ?? 0) ^ 0x80;
    const { server, job } = await corrupting(() => ({ body: bad }));
    await expect(job.done).rejects.toThrow(
      `hf://org/tiny: model.safetensors: fetched twice, and twice its sha256 was not the origin's ${sha256(weights)}: first ${sha256(bad)}, then ${sha256(bad)}; the server holds other bytes than the origin says, so resolve the model again or check the mirror or proxy in between`,
    );
    expect(server.requests).toHaveLength(2);
    expect(job.state).toBe('failed');
  });

  it('says which model and file a refused download was for', async () => {
    const server = await serveRanges({});
    servers.push(server);
    const origin = hfOrigin([files.weights]);
    const job = new ModelFetcher({ root: tempRoot() }).ensure(origin, () => ({ url: server.url('/gone') }));
    await expect(job.done).rejects.toThrow(
      /^hf:\/\/org\/tiny: model\.safetensors: GET http:\/\/127\.0\.0\.1:\d+\/gone answered 404 Not Found: the file is gone from where the origin says it was: resolve the model again$/,
    );
    expect(job.error).toMatch(/answered 404 Not Found/);
  });

  it('reports the rate over a sliding window, and the time left at it', async () => {
    const server = await serveRanges({ '/w': weights }, () => ({ stallAfter: 100_000 }));
    servers.push(server);
    let now = 1_000_000;
    const origin = hfOrigin([files.weights]);
    const job = new ModelFetcher({
      root: tempRoot(),
      now: () => now,
      fetchDefaults: { stallMs: 60_000 },
    }).ensure(origin, () => ({ url: server.url('/w') }));
    await until('100 kB done', () => job.progress().done === 100_000);
    expect(job.state).toBe('downloading');
    now += 2000;
    expect(job.progress()).toEqual({ done: 100_000, total: 200_000, rate_bps: 50_000, eta_s: 2 });
    now += 20_000;
    expect(job.progress()).toEqual({ done: 100_000, total: 200_000, rate_bps: 0 });
    job.cancel();
    await expect(job.done).rejects.toThrow(/cancelled/);
  });

  it('never fetches a local path: it resolves to the path itself', async () => {
    const dir = tempRoot();
    mkdirSync(join(dir, 'm'), { recursive: true });
    writeFileSync(join(dir, 'm', 'a.gguf'), 'x');
    const fetcher = new ModelFetcher({ root: join(dir, 'unused') });
    const where = () => {
      throw new Error('a local path asked where to fetch from');
    };
    const asDir = await fetcher.ensure(
      { source: join(dir, 'm'), kind: 'path', revision: '', files: [{ path: 'a.gguf', size: 1 }] },
      where,
    ).done;
    expect(asDir).toEqual({ snapshotDir: join(dir, 'm'), paths: { 'a.gguf': join(dir, 'm', 'a.gguf') } });
    const asFile = await fetcher.ensure(
      { source: join(dir, 'm', 'a.gguf'), kind: 'path', revision: '', files: [{ path: 'a.gguf', size: 1 }] },
      where,
    ).done;
    expect(asFile).toEqual({ snapshotDir: join(dir, 'm'), paths: { 'a.gguf': join(dir, 'm', 'a.gguf') } });
    expect(existsSync(join(dir, 'unused'))).toBe(false);
  });
});

describe('connections per source', () => {
  it('takes the connections a file source names over the fetcher’s (one from a mirror, several elsewhere)', async () => {
    const server = await serveRanges({ '/w': weights });
    servers.push(server);
    const origin = hfOrigin([files.weights]);
    const fetchWith = async (connections?: number) => {
      const fetcher = new ModelFetcher({ root: tempRoot(), fetchDefaults: { connections: 4 } });
      const before = server.requests.length;
      await fetcher.ensure(origin, () => ({
        url: server.url('/w'),
        ...(connections === undefined ? {} : { connections }),
      })).done;
      return server.requests.slice(before).length;
    };
    expect(await fetchWith()).toBe(4);
    expect(await fetchWith(1)).toBe(1);
  });
});
