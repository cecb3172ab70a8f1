import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { serveRanges, type Plan, type RangeServer } from '../../test/fakes/files/range-server.js';
import { DigestMismatchError, defaultConnections, fetchFile, type FetchFileOptions } from './download.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const gitSha1 = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

let servers: RangeServer[] = [];
/** The client under test: its own (the default), or an injected fetch. */
let injected: typeof fetch | undefined;
let dirs: string[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  servers = [];
  dirs = [];
});

async function setup(
  bytes: Buffer,
  plan?: (req: { range: string | undefined }, i: number) => Plan | undefined,
) {
  const server = await serveRanges({ '/f.bin': bytes }, plan);
  servers.push(server);
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-download-'));
  dirs.push(dir);
  const dest = join(dir, 'blobs', 'abc');
  const base: FetchFileOptions = {
    url: server.url('/f.bin'),
    dest,
    size: bytes.length,
    digest: { algorithm: 'sha256', hex: sha256(bytes) },
    retryBaseMs: 5,
    stallMs: 2000,
    ...(injected === undefined ? {} : { fetch: injected }),
  };
  return { server, dest, base, ranges: () => server.requests.map((r) => r.range) };
}

const clients: [string, typeof fetch | undefined][] = [
  ['its own HTTP client', undefined],
  ['an injected fetch', (input, init) => globalThis.fetch(input, init)],
];

describe.each(clients)('fetchFile over %s', (_name, client) => {
  beforeEach(() => {
    injected = client;
  });

  it('fetches a file, verifies its sha256 and renames it into place; progress never runs ahead of the disk', async () => {
    const bytes = randomBytes(300_000);
    const { dest, base, ranges } = await setup(bytes);
    const seen: number[] = [];
    await fetchFile({
      ...base,
      onProgress: (n) => {
        seen.push(n);
        expect(statSync(`${dest}.incomplete`).size).toBeGreaterThanOrEqual(n);
      },
    });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(existsSync(`${dest}.incomplete`)).toBe(false);
    expect(seen.at(-1)).toBe(bytes.length);
    expect(ranges()).toEqual([undefined]);
  });

  it('fetches a file of unknown size (an engine archive), taking the size its answer gives and returning its sha256', async () => {
    const bytes = randomBytes(300_000);
    const { dest, base } = await setup(bytes);
    const seen: [number, number | undefined][] = [];
    const got = await fetchFile({
      ...base,
      size: undefined,
      digest: { algorithm: 'sha256' },
      onProgress: (n, size) => seen.push([n, size]),
    });
    expect(got).toEqual({ bytes: bytes.length, hex: sha256(bytes) });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(seen[0]).toEqual([0, bytes.length]);
    expect(seen.at(-1)).toEqual([bytes.length, bytes.length]);
  });

  it('verifies a git blob id (git-sha1) for a small hub file', async () => {
    const bytes = Buffer.from('{"architectures": ["LlamaForCausalLM"]}\n');
    const { dest, base } = await setup(bytes);
    await fetchFile({ ...base, digest: { algorithm: 'git-sha1', hex: gitSha1(bytes) } });
    expect(readFileSync(dest, 'utf8')).toContain('Llama');
  });

  it('leaves a dest of the right size alone, and asks nothing', async () => {
    const bytes = randomBytes(1000);
    const { server, dest, base } = await setup(bytes);
    await fetchFile(base);
    await fetchFile(base);
    expect(server.requests).toHaveLength(1);
    writeFileSync(dest, 'short');
    await fetchFile(base);
    expect(readFileSync(dest).equals(bytes)).toBe(true);
  });

  it('resumes after a cut, in a later run, by Range: bytes=N- from the partial file', async () => {
    const bytes = randomBytes(500_000);
    const { server, dest, base, ranges } = await setup(bytes, (_r, i) =>
      i === 0 ? { cutAfter: 200_000 } : undefined,
    );
    await expect(fetchFile({ ...base, retries: 0 })).rejects.toThrow(/the connection (broke|ended) after/);
    const kept = statSync(`${dest}.incomplete`).size;
    expect(kept).toBe(200_000);
    const progress: number[] = [];
    await fetchFile({ ...base, onProgress: (n) => progress.push(n) });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(ranges()).toEqual([undefined, `bytes=${kept}-`]);
    expect(progress[0]).toBe(kept);
    expect(server.bytesSent()).toBe(bytes.length);
  });

  it('retries a cut within one run, continuing where the bytes stopped', async () => {
    const bytes = randomBytes(400_000);
    const { dest, base, ranges } = await setup(bytes, (_r, i) => (i < 2 ? { cutAfter: 100_000 } : undefined));
    await fetchFile(base);
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(ranges()).toEqual([undefined, 'bytes=100000-', 'bytes=200000-']);
  });

  it('counts failures again from zero once a try made progress', async () => {
    const bytes = randomBytes(300_000);
    const { dest, base, ranges } = await setup(bytes, () => ({ cutAfter: 50_000 }));
    await fetchFile({ ...base, retries: 1 });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(ranges()).toHaveLength(6);
  });

  it('drops a stalled connection after stallMs and retries it', async () => {
    const bytes = randomBytes(300_000);
    const { dest, base, ranges } = await setup(bytes, (_r, i) =>
      i === 0 ? { stallAfter: 64 * 1024 } : undefined,
    );
    const started = Date.now();
    await fetchFile({ ...base, stallMs: 150 });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(ranges()).toEqual([undefined, `bytes=${64 * 1024}-`]);
  });

  it('says a stall in words when it gives up', async () => {
    const bytes = randomBytes(100_000);
    const { base } = await setup(bytes, () => ({ stallAfter: 0 }));
    await expect(fetchFile({ ...base, stallMs: 60, retries: 1 })).rejects.toThrow(
      /abc: no byte for 60 ms; gave up after 2 tries/,
    );
  });

  it('retries 5xx and 429 with backoff, and gives up after the retries, saying so', async () => {
    const bytes = randomBytes(10_000);
    const flaky = await setup(bytes, (_r, i) =>
      i === 0 ? { status: 503 } : i === 1 ? { status: 429, headers: { 'retry-after': '0' } } : undefined,
    );
    await fetchFile(flaky.base);
    expect(readFileSync(flaky.dest).equals(bytes)).toBe(true);
    expect(flaky.server.requests).toHaveLength(3);

    const down = await setup(bytes, () => ({ status: 500 }));
    await expect(fetchFile({ ...down.base, retries: 2 })).rejects.toThrow(
      /abc: GET http:\/\/127\.0\.0\.1:\d+\/f\.bin answered 500 Internal Server Error; gave up after 3 tries/,
    );
    expect(down.server.requests).toHaveLength(3);
  });

  it('refuses a 404 at once, in words', async () => {
    const { server, base } = await setup(randomBytes(100));
    await expect(fetchFile({ ...base, url: server.url('/gone.bin') })).rejects.toThrow(
      /abc: GET http:\/\/127\.0\.0\.1:\d+\/gone\.bin answered 404 Not Found: the file is gone from where the origin says it was: resolve the model again/,
    );
    expect(server.requests).toHaveLength(1);
  });

  it('refuses a 401 with what to check', async () => {
    const { base } = await setup(randomBytes(100), () => ({
      status: 401,
      headers: { 'x-error-message': 'Access restricted' },
    }));
    await expect(fetchFile(base)).rejects.toThrow(
      /answered 401 Unauthorized \(Access restricted\): check hub.token/,
    );
  });

  it('refuses a 416 (the server has fewer bytes than the partial file) in words', async () => {
    const bytes = randomBytes(1000);
    const { server, dest, base } = await setup(bytes);
    // The origin says 2000 bytes, 1500 are here, the server has 1000.
    mkdirSync(join(dest, '..'), { recursive: true });
    writeFileSync(`${dest}.incomplete`, randomBytes(1500));
    await expect(fetchFile({ ...base, size: 2000, digest: undefined })).rejects.toThrow(
      /abc: GET http:\/\/127\.0\.0\.1:\d+\/f\.bin answered 416 Range Not Satisfiable: the file on the server is shorter than the origin says/,
    );
    expect(server.requests.at(-1)?.range).toBe('bytes=1500-');
  });

  it('refuses a file whose size on the server is not the origin’s', async () => {
    const { base } = await setup(randomBytes(1000));
    await expect(fetchFile({ ...base, size: 999, digest: undefined })).rejects.toThrow(
      /abc: the server says it has 1000 bytes, the origin says 999: the file changed since the model was resolved; resolve it again/,
    );
  });

  it('refuses a Content-Range that is not the range asked for', async () => {
    const bytes = randomBytes(1000);
    const { dest, base } = await setup(bytes, (_r, i) =>
      i === 1 ? { headers: { 'content-range': 'bytes 0-499/1000' } } : { cutAfter: 300 },
    );
    await expect(fetchFile(base)).rejects.toThrow(/abc: asked for bytes 300-999, the server answered 0-499/);
    expect(statSync(`${dest}.incomplete`).size).toBe(300);
  });

  it('catches one corrupted byte: deletes the file and throws DigestMismatchError with both digests', async () => {
    const bytes = randomBytes(50_000);
    const bad = Buffer.from(bytes);
    bad[12_345] = (bad[12_345] ?? 0) ^ 0xff;
    const { dest, base } = await setup(bytes, () => ({ body: bad }));
    const err = await fetchFile(base).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DigestMismatchError);
    expect((err as Error).message).toBe(
      `abc: its sha256 is ${sha256(bad)}, the origin says ${sha256(bytes)}; the file was deleted and will be fetched again`,
    );
    expect(existsSync(dest)).toBe(false);
    expect(existsSync(`${dest}.incomplete`)).toBe(false);
  });

  it('catches a corrupted byte in a file fetched in parts (read back after)', async () => {
    const bytes = randomBytes(400_000);
    const bad = Buffer.from(bytes);
    bad[399_000] = (bad[399_000] ?? 0) ^ 1;
    const { dest, base } = await setup(bytes, () => ({ body: bad }));
    await expect(fetchFile({ ...base, connections: 4 })).rejects.toBeInstanceOf(DigestMismatchError);
    expect(existsSync(`${dest}.incomplete`)).toBe(false);
  });

  it('fetches a file in parts over several connections', async () => {
    const bytes = randomBytes(1_000_000);
    const { dest, base, ranges } = await setup(bytes);
    let last = 0;
    await fetchFile({ ...base, connections: 4, onProgress: (n) => (last = n) });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(ranges().sort()).toEqual([
      'bytes=0-249999',
      'bytes=250000-499999',
      'bytes=500000-749999',
      'bytes=750000-999999',
    ]);
    expect(last).toBe(bytes.length);
    expect(existsSync(`${dest}.incomplete.parts`)).toBe(false);
  });

  it('resumes each part from its saved progress in a later run', async () => {
    const bytes = randomBytes(1_000_000);
    const { server, dest, base } = await setup(bytes, (_r, i) => (i < 4 ? { cutAfter: 100_000 } : undefined));
    await expect(fetchFile({ ...base, connections: 4, retries: 0 })).rejects.toThrow(/after/);
    const saved = JSON.parse(readFileSync(`${dest}.incomplete.parts`, 'utf8')) as {
      parts: { start: number; end: number; done: number }[];
    };
    expect(saved.parts).toHaveLength(4);
    const doneBefore = saved.parts.reduce((s, p) => s + p.done, 0);
    expect(doneBefore).toBeGreaterThan(0);
    const sentBefore = server.bytesSent();
    await fetchFile({ ...base, connections: 4 });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    const resumed = server.requests
      .slice(4)
      .map((r) => r.range)
      .sort();
    const expected = saved.parts
      .filter((p) => p.start + p.done < p.end)
      .map((p) => `bytes=${p.start + p.done}-${p.end - 1}`)
      .sort();
    expect(resumed).toEqual(expected);
    expect(server.bytesSent() - sentBefore).toBe(bytes.length - doneBefore);
    expect(existsSync(`${dest}.incomplete.parts`)).toBe(false);
  });

  it('restarts from 0 when a server ignores Range, with one connection and with several', async () => {
    const bytes = randomBytes(300_000);
    const one = await setup(bytes, (_r, i) => (i === 0 ? { cutAfter: 100_000 } : { ignoreRange: true }));
    await expect(fetchFile({ ...one.base, retries: 0 })).rejects.toThrow();
    await fetchFile(one.base);
    expect(readFileSync(one.dest).equals(bytes)).toBe(true);
    expect(one.server.requests[1]?.range).toBe('bytes=100000-');

    const several = await setup(bytes, () => ({ ignoreRange: true }));
    await fetchFile({ ...several.base, connections: 3 });
    expect(readFileSync(several.dest).equals(bytes)).toBe(true);
    expect(several.ranges().at(-1)).toBeUndefined();
  });

  it('follows redirects, sending the headers to the first origin only', async () => {
    const bytes = randomBytes(2000);
    const cdn = await serveRanges({ '/blob': bytes });
    servers.push(cdn);
    const { server, dest, base } = await setup(bytes, (r, i) =>
      i === 0 ? { redirect: '/f.bin?again' } : i === 1 ? { redirect: cdn.url('/blob') } : undefined,
    );
    await fetchFile({ ...base, headers: { authorization: 'Bearer hf_secret' } });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(server.requests.map((r) => r.authorization)).toEqual(['Bearer hf_secret', 'Bearer hf_secret']);
    expect(cdn.requests.map((r) => r.authorization)).toEqual([undefined]);
  });

  it('stops on abort and keeps the partial file for a later run', async () => {
    const bytes = randomBytes(300_000);
    const { dest, base } = await setup(bytes, (_r, i) => (i === 0 ? { stallAfter: 50_000 } : undefined));
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('cancelled by test')), 100);
    await expect(fetchFile({ ...base, signal: ac.signal })).rejects.toThrow(/cancelled by test/);
    expect(statSync(`${dest}.incomplete`).size).toBe(50_000);
  });

  it('splits large files by default', () => {
    const MB = 1024 * 1024;
    expect(defaultConnections(10 * MB)).toBe(1);
    expect(defaultConnections(64 * MB)).toBe(2);
    expect(defaultConnections(100 * MB)).toBe(3);
    expect(defaultConnections(10_000 * MB)).toBe(8);
  });
});

describe('fetchFile of a file whose size nobody says', () => {
  it('takes the end of a chunked answer as the end of the file, and hashes what came', async () => {
    const bytes = randomBytes(200_000);
    const server = createServer((_req, res) => {
      // No Content-Length: node:http sends the body chunked.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write(bytes.subarray(0, 50_000));
      setTimeout(() => res.end(bytes.subarray(50_000)), 20);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-download-'));
    dirs.push(dir);
    try {
      const { port } = server.address() as AddressInfo;
      const dest = join(dir, 'archive');
      for (const client of clients) {
        rmSync(dest, { force: true });
        const got = await fetchFile({
          url: `http://127.0.0.1:${port}/a.tar.gz`,
          dest,
          digest: { algorithm: 'sha256' },
          retries: 0,
          ...(client[1] === undefined ? {} : { fetch: client[1] }),
        });
        expect(got).toEqual({ bytes: bytes.length, hex: sha256(bytes) });
        expect(readFileSync(dest).equals(bytes)).toBe(true);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('fetchFile with an injected fetch', () => {
  it('sends every request through it, redirects included', async () => {
    const bytes = randomBytes(1000);
    const { server, dest, base } = await setup(bytes, (_r, i) =>
      i === 0 ? { redirect: '/f.bin' } : undefined,
    );
    const seen: string[] = [];
    await fetchFile({
      ...base,
      fetch: (input, init) => {
        seen.push(input instanceof URL ? input.href : typeof input === 'string' ? input : input.url);
        return globalThis.fetch(input, init);
      },
    });
    expect(readFileSync(dest).equals(bytes)).toBe(true);
    expect(seen).toEqual([server.url('/f.bin'), server.url('/f.bin')]);
  });
});

describe('fetchFile of a large file (its digest followed by a hashing thread)', () => {
  const big = randomBytes(20 * 1024 * 1024);
  const bad = Buffer.from(big);
  bad[big.length - 10] = (bad[big.length - 10] ?? 0) ^ 1;

  it('resumes after a cut and verifies the sha256 over the resumed prefix and the rest', async () => {
    const { dest, base, ranges } = await setup(big, (_r, i) =>
      i === 0 ? { cutAfter: 5_000_000 } : undefined,
    );
    await expect(fetchFile({ ...base, retries: 0 })).rejects.toThrow(/after/);
    await fetchFile(base);
    expect(readFileSync(dest).equals(big)).toBe(true);
    expect(ranges()).toEqual([undefined, 'bytes=5000000-']);
  });

  it('verifies a git blob id, and catches a corrupted byte with one connection and with several', async () => {
    const good = await setup(big);
    await fetchFile({ ...good.base, digest: { algorithm: 'git-sha1', hex: gitSha1(big) } });
    expect(readFileSync(good.dest).equals(big)).toBe(true);

    const corrupt = await setup(big, () => ({ body: bad }));
    await expect(fetchFile(corrupt.base)).rejects.toThrow(
      `abc: its sha256 is ${sha256(bad)}, the origin says ${sha256(big)}`,
    );
    await expect(fetchFile({ ...corrupt.base, connections: 4 })).rejects.toBeInstanceOf(DigestMismatchError);
    expect(existsSync(`${corrupt.dest}.incomplete`)).toBe(false);
  });

  it('hashes from byte 0 again when a server ignores the range of a resumed fetch', async () => {
    const { dest, base, ranges } = await setup(big, (_r, i) =>
      i === 0 ? { cutAfter: 3_000_000 } : { ignoreRange: true },
    );
    await expect(fetchFile({ ...base, retries: 0 })).rejects.toThrow(/after/);
    await fetchFile(base);
    expect(readFileSync(dest).equals(big)).toBe(true);
    expect(ranges()).toEqual([undefined, 'bytes=3000000-']);
  });

  it('fetches in parts and verifies the whole', async () => {
    const { dest, base } = await setup(big);
    await fetchFile({ ...base, connections: 4 });
    expect(readFileSync(dest).equals(big)).toBe(true);
  });
});

describe('fetchFile in a program started with --input-type=module', () => {
  it('hashes a large file on its thread there too (the thread is not handed the ES module flag)', async () => {
    const bytes = randomBytes(17 * 1024 * 1024);
    const server = await serveRanges({ '/big.bin': bytes });
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-esm-'));
    try {
      const built = join(import.meta.dirname, '../../dist/models/download.js');
      const script = `
        import { fetchFile } from ${JSON.stringify(built)};
        await fetchFile({ url: ${JSON.stringify(server.url('/big.bin'))}, dest: ${JSON.stringify(join(dir, 'blob'))},
          size: ${bytes.length}, connections: 1,
          digest: { algorithm: 'sha256', hex: ${JSON.stringify(createHash('sha256').update(bytes).digest('hex'))} } });
        process.stdout.write('ok');
      `;
      // Not spawnSync: the server answering it runs in this process.
      const r = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, ['--input-type=module', '-e', script], (e, stdout, stderr) => {
          resolve({ stdout, stderr: stderr === '' && e !== null ? e.message : stderr });
        });
      });
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe('ok');
      expect(readFileSync(join(dir, 'blob')).equals(bytes)).toBe(true);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
