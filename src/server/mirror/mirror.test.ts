import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';

import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { patternBytes, startFakeHub, type FakeHub } from '../../../test/fakes/hub/hub.js';
import { gate } from '../../../test/support/timing.js';
import type { ErrorBody } from '../../core/api-types.js';
import { LlmgwError } from '../../core/errors.js';
import { blobKey, filePaths, originLayout } from '../../models/cache-layout.js';
import type { Origin, OriginFile } from '../../models/origin.js';
import { resolveOrigin } from '../../models/resolve.js';

import { Mirror } from './mirror.js';
import { mirrorBlobsPath, mirrorRoute } from './mirror-route.js';

const token = 'hf_mirrortesttoken0123456789';
const gguf = randomBytes(3 * 1024 * 1024 + 17);
const config = Buffer.from(JSON.stringify({ architectures: ['LlamaForCausalLM'], hidden_size: 64 }));
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

interface Served {
  url: string;
  mirror: Mirror;
  dir: string;
  logs: () => string;
  close: () => Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A mirror behind a real HTTP server; requests need `Authorization: Bearer agent`. */
async function serveMirror(o: {
  hub: string;
  origins: Origin[];
  dir?: string;
  enabled?: boolean;
}): Promise<Served> {
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), 'llmgw-mirror-'));
  let text = '';
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        text += chunk.toString();
        cb();
      },
    }),
  );
  const keys = new Map<string, { origin: Origin; file: OriginFile }>();
  for (const origin of o.origins)
    for (const file of origin.files) keys.set(blobKey(origin, file), { origin, file });
  const mirror = new Mirror({
    dir,
    hub: () => ({ endpoint: o.hub, token }),
    lookup: (key) => keys.get(key),
    logger,
    // Failures are the tests' own: no waiting on backoff.
    upstream: { retries: 0 },
    ...(o.enabled === undefined ? {} : { enabled: o.enabled }),
  });
  const server = createServer(
    mirrorRoute({
      mirror,
      logger,
      authorize: (req) =>
        req.headers.authorization === 'Bearer agent'
          ? Promise.resolve('agent')
          : Promise.reject(new LlmgwError('unauthenticated', 'not the agent')),
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await mirror.close();
    if (o.dir === undefined) rmSync(dir, { recursive: true, force: true });
  };
  cleanups.push(close);
  return { url, mirror, dir, logs: () => text, close };
}

function blobUrl(served: Served, key: string): string {
  return `${served.url}${mirrorBlobsPath}${key}`;
}

async function get(served: Served, key: string, headers: Record<string, string> = {}) {
  const res = await fetch(blobUrl(served, key), { headers: { authorization: 'Bearer agent', ...headers } });
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body, json: () => JSON.parse(body.toString()) };
}

/** Requests the hub got for this file's bytes (the resolve, and the file server it redirects to). */
function fileRequests(hub: FakeHub, origin: Origin, path: string): string[] {
  const file = origin.files.find((f) => f.path === path);
  return hub.requests
    .map((r) => r.url)
    .filter(
      (u) =>
        u.includes(`/resolve/${origin.commit ?? ''}/${path}`) ||
        (file?.sha256 !== undefined && u.includes(file.sha256)),
    );
}

describe('Mirror', () => {
  let hub: FakeHub;
  let ggufOrigin: Origin;
  let stOrigin: Origin;
  const ggufFile = () => ggufOrigin.files.find((f) => f.path === 'model-Q4_K_M.gguf')!;
  const configFile = () => stOrigin.files.find((f) => f.path === 'config.json')!;

  beforeAll(async () => {
    hub = await startFakeHub({
      repos: {
        'org/model-GGUF': { files: { 'model-Q4_K_M.gguf': gguf } },
        'org/model': {
          files: {
            'config.json': config,
            'tokenizer.json': Buffer.from('{"version":"1.0"}'),
            'model.safetensors': randomBytes(4096),
          },
        },
      },
    });
    const opts = { fetch, endpoint: hub.url, token };
    ggufOrigin = await resolveOrigin('hf://org/model-GGUF/model-Q4_K_M.gguf', opts);
    stOrigin = await resolveOrigin('hf://org/model', opts);
  });
  afterAll(async () => {
    await hub.close();
  });

  it('fetches a blob once for clients at once, serving the first before the upstream has finished', async () => {
    const { wait: until, open: release } = gate();
    // fetchFile writes what arrives in 4 MiB blocks (or each 250 ms while bytes keep coming):
    // the upstream holds back after more than one block, so some of the file is on disk.
    const big = randomBytes(6 * 1024 * 1024 + 5);
    const slow = await startFakeHub({
      repos: { 'org/model-GGUF': { files: { 'model-Q4_K_M.gguf': big } } },
      hold: { afterBytes: 5 * 1024 * 1024, until },
    });
    cleanups.push(() => slow.close());
    const origin = await resolveOrigin('hf://org/model-GGUF/model-Q4_K_M.gguf', {
      fetch,
      endpoint: slow.url,
    });
    const served = await serveMirror({ hub: slow.url, origins: [origin] });
    const key = blobKey(origin, origin.files[0]!);

    const first = await fetch(blobUrl(served, key), { headers: { authorization: 'Bearer agent' } });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-length')).toBe(String(big.length));
    const reader = first.body!.getReader();
    const chunk = await reader.read();
    // Bytes reached the client while the upstream still holds the rest back.
    expect(chunk.value!.length).toBeGreaterThan(0);
    const layout = originLayout(served.dir, origin)!;
    const { blob } = filePaths(layout, origin, origin.files[0]!);
    expect(existsSync(blob)).toBe(false);
    expect(existsSync(`${blob}.incomplete`)).toBe(true);

    const second = get(served, key);
    // A range past what has arrived waits for it.
    const tail = get(served, key, { range: 'bytes=-100' });
    release();
    const parts = [Buffer.from(chunk.value)];
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      parts.push(Buffer.from(next.value));
    }
    const a = Buffer.concat(parts);
    const b = (await second).body;
    expect(sha256(a)).toBe(origin.files[0]!.sha256);
    expect(b.equals(a)).toBe(true);
    expect((await tail).status).toBe(206);
    expect((await tail).body.equals(big.subarray(big.length - 100))).toBe(true);
    expect(fileRequests(slow, origin, 'model-Q4_K_M.gguf')).toEqual([
      `/org/model-GGUF/resolve/${origin.commit!}/model-Q4_K_M.gguf`,
      `/lfs-files/${origin.files[0]!.sha256!}`,
    ]);
  });

  it('keeps what it fetched as a Hugging Face cache and serves it again without the hub', async () => {
    const served = await serveMirror({ hub: hub.url, origins: [stOrigin] });
    const key = blobKey(stOrigin, configFile());
    const before = hub.requests.length;
    const fetched = await get(served, key);
    expect(fetched.status).toBe(200);
    expect(fetched.body.equals(config)).toBe(true);
    expect(fetched.headers.get('etag')).toBe(`"${key}"`);
    expect(fetched.headers.get('accept-ranges')).toBe('bytes');
    expect(hub.requests.length).toBe(before + 1);
    // The last byte was served before the mirror had checked the file and moved it into place.
    await served.mirror.idle();
    // A small file's token went to the hub (its own address).
    expect(hub.requests.at(-1)!.authorization).toBe(`Bearer ${token}`);

    const layout = originLayout(served.dir, stOrigin)!;
    const paths = filePaths(layout, stOrigin, configFile());
    expect(readFileSync(paths.blob).equals(config)).toBe(true);
    expect(readlinkSync(paths.snapshot)).toBe(paths.link);
    expect(readFileSync(paths.snapshot).equals(config)).toBe(true);
    expect(readFileSync(layout.ref!.path, 'utf8')).toBe(stOrigin.commit);

    const again = await get(served, key);
    expect(again.body.equals(config)).toBe(true);
    expect(hub.requests.length).toBe(before + 1);
  });

  it('answers ranges: A-B, A-, -N, and 416 outside the file', async () => {
    const served = await serveMirror({ hub: hub.url, origins: [ggufOrigin] });
    const key = blobKey(ggufOrigin, ggufFile());
    const size = gguf.length;

    const ab = await get(served, key, { range: 'bytes=100-199' });
    expect(ab.status).toBe(206);
    expect(ab.headers.get('content-range')).toBe(`bytes 100-199/${size}`);
    expect(ab.headers.get('content-length')).toBe('100');
    expect(ab.body.equals(gguf.subarray(100, 200))).toBe(true);

    const from = await get(served, key, { range: `bytes=${size - 1000}-` });
    expect(from.status).toBe(206);
    expect(from.headers.get('content-range')).toBe(`bytes ${size - 1000}-${size - 1}/${size}`);
    expect(from.body.equals(gguf.subarray(size - 1000))).toBe(true);

    const last = await get(served, key, { range: 'bytes=-10' });
    expect(last.status).toBe(206);
    expect(last.body.equals(gguf.subarray(size - 10))).toBe(true);

    // Past the end is cut at the end (RFC 9110, 14.1.2).
    const over = await get(served, key, { range: `bytes=${size - 5}-${size + 100}` });
    expect(over.status).toBe(206);
    expect(over.body.equals(gguf.subarray(size - 5))).toBe(true);

    for (const range of [`bytes=${size}-`, 'bytes=10-5', 'bytes=-0', 'bytes=0-1,5-6', 'items=0-1']) {
      const refused = await get(served, key, { range });
      expect(refused.status, range).toBe(416);
      expect(refused.headers.get('content-range')).toBe(`bytes */${size}`);
      expect(refused.json().error.message).toBe(
        `the range "${range}" is not within model-Q4_K_M.gguf (${size} bytes): ask for one range, bytes=A-B, bytes=A- or bytes=-N, inside the file`,
      );
    }
  });

  it('answers HEAD from the catalog without fetching', async () => {
    const served = await serveMirror({ hub: hub.url, origins: [ggufOrigin] });
    const before = hub.requests.length;
    const res = await fetch(blobUrl(served, blobKey(ggufOrigin, ggufFile())), {
      method: 'HEAD',
      headers: { authorization: 'Bearer agent', range: 'bytes=0-9' },
    });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-length')).toBe('10');
    expect(res.headers.get('content-range')).toBe(`bytes 0-9/${gguf.length}`);
    expect(hub.requests.length).toBe(before);
  });

  it('serves files placed by hand (a blob; a file at its snapshot path) without asking the hub', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-mirror-hand-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const stLayout = originLayout(dir, stOrigin)!;
    const configPaths = filePaths(stLayout, stOrigin, configFile());
    mkdirSync(dirname(configPaths.blob), { recursive: true });
    writeFileSync(configPaths.blob, config);
    const ggufPaths = filePaths(originLayout(dir, ggufOrigin)!, ggufOrigin, ggufFile());
    mkdirSync(dirname(ggufPaths.snapshot), { recursive: true });
    writeFileSync(ggufPaths.snapshot, gguf);

    const served = await serveMirror({ hub: hub.url, origins: [stOrigin, ggufOrigin], dir });
    const before = hub.requests.length;
    const a = await get(served, blobKey(stOrigin, configFile()));
    expect(a.body.equals(config)).toBe(true);
    const b = await get(served, blobKey(ggufOrigin, ggufFile()), { range: 'bytes=5-' });
    expect(b.body.equals(gguf.subarray(5))).toBe(true);
    await get(served, blobKey(ggufOrigin, ggufFile()));
    expect(hub.requests.length).toBe(before);
    // Checked once (git blob id and sha256), then remembered.
    expect(served.logs().match(/checking the git blob id of/g)).toHaveLength(1);
    expect(served.logs().match(/checking the sha256 of/g)).toHaveLength(1);
    // The hand-placed blob is linked into its snapshot, as the cache layout has it.
    expect(readlinkSync(configPaths.snapshot)).toBe(configPaths.link);
  });

  it('fetches a file placed by hand with wrong bytes from the hub, saying so and leaving it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-mirror-bad-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const ggufPaths = filePaths(originLayout(dir, ggufOrigin)!, ggufOrigin, ggufFile());
    const wrong = Buffer.from(gguf);
    wrong[1000] = (wrong[1000]! + 1) % 256;
    mkdirSync(dirname(ggufPaths.snapshot), { recursive: true });
    writeFileSync(ggufPaths.snapshot, wrong);
    const configPaths = filePaths(originLayout(dir, stOrigin)!, stOrigin, configFile());
    mkdirSync(dirname(configPaths.blob), { recursive: true });
    writeFileSync(configPaths.blob, Buffer.from('{"not":"it"}'));

    const served = await serveMirror({ hub: hub.url, origins: [stOrigin, ggufOrigin], dir });
    const before = hub.requests.length;
    const a = await get(served, blobKey(ggufOrigin, ggufFile()));
    expect(sha256(a.body)).toBe(ggufFile().sha256);
    const b = await get(served, blobKey(stOrigin, configFile()));
    expect(b.body.equals(config)).toBe(true);
    expect(hub.requests.length).toBe(before + 3);
    await served.mirror.idle();
    expect(served.logs()).toContain(
      `the file at ${ggufPaths.snapshot} (placed by hand) does not match its sha256: expected ${ggufFile().sha256!}, found ${sha256(wrong)}: it is left as it is, and the mirror fetches model-Q4_K_M.gguf from upstream into ${ggufPaths.blob} and serves that`,
    );
    expect(served.logs()).toContain(
      `the mirror's blob ${configPaths.blob} (config.json of hf://org/model) is 12 bytes where ${config.length} were expected: it is removed and fetched again from upstream`,
    );
    expect(readFileSync(ggufPaths.snapshot).equals(wrong)).toBe(true);
    expect(readFileSync(ggufPaths.blob).equals(gguf)).toBe(true);
  });

  it('cuts a client off before the last byte when the file does not match its digest, and fetches it once more', async () => {
    const claimed = 'e'.repeat(64);
    const lying = await startFakeHub({
      repos: { 'org/bad-GGUF': { files: { 'bad.gguf': { size: 70_000, sha256: claimed } } } },
    });
    cleanups.push(() => lying.close());
    const origin = await resolveOrigin('hf://org/bad-GGUF/bad.gguf', { fetch, endpoint: lying.url });
    const served = await serveMirror({ hub: lying.url, origins: [origin] });
    const res = await fetch(blobUrl(served, claimed), { headers: { authorization: 'Bearer agent' } });
    expect(res.status).toBe(200);
    await expect(res.arrayBuffer()).rejects.toThrow();
    await served.mirror.idle();
    const found = sha256(patternBytes(70_000));
    expect(served.logs()).toContain(
      `the mirror could not fetch bad.gguf of hf://org/bad-GGUF/bad.gguf: ${claimed}: its sha256 is ${found}, the origin says ${claimed}; the file was deleted and will be fetched again`,
    );
    expect(lying.requests.filter((r) => r.url === `/lfs-files/${claimed}`)).toHaveLength(2);
    // The last byte waits for the check: asked for it, the client hears why in words.
    const again = await get(served, claimed, { range: 'bytes=-1' });
    expect(again.status).toBe(502);
    expect(again.json().error.message).toContain(
      `the mirror could not fetch bad.gguf of hf://org/bad-GGUF/bad.gguf from ${lying.url}/org/bad-GGUF/resolve/${origin.commit!}/bad.gguf: `,
    );
  });

  it('refuses an unknown key in words', async () => {
    const served = await serveMirror({ hub: hub.url, origins: [ggufOrigin] });
    for (const key of ['0'.repeat(64), 'not-a-key']) {
      const res = await get(served, key);
      expect(res.status).toBe(404);
      expect(res.json().error).toEqual({
        code: 'not_found',
        message: `no model in the catalog has a file with digest ${key}: the mirror serves only the files of the catalog's models (llmgw ctl model show MODEL lists them)`,
      });
    }
    const other = await fetch(`${served.url}${mirrorBlobsPath}`, {
      headers: { authorization: 'Bearer agent' },
    });
    expect(other.status).toBe(404);
    expect(((await other.json()) as ErrorBody).error.message).toBe(
      `no API route GET ${mirrorBlobsPath}: the mirror answers GET and HEAD ${mirrorBlobsPath}KEY`,
    );
    const post = await fetch(blobUrl(served, blobKey(ggufOrigin, ggufFile())), {
      method: 'POST',
      headers: { authorization: 'Bearer agent' },
    });
    expect(post.status).toBe(404);
  });

  it('refuses the unauthenticated, and says so when disabled', async () => {
    const served = await serveMirror({ hub: hub.url, origins: [ggufOrigin], enabled: false });
    const key = blobKey(ggufOrigin, ggufFile());
    const anon = await fetch(blobUrl(served, key));
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as ErrorBody).error.message).toBe('not the agent');
    const off = await get(served, key);
    expect(off.status).toBe(503);
    expect(off.json().error.message).toBe(
      'the mirror is disabled (mirror.enabled: false): agents fetch from the hub',
    );
  });

  describe('when the upstream fails', () => {
    let broken: Server;
    let brokenUrl: string;
    beforeAll(async () => {
      // A hub answering 500, repeating what it was sent (as a careless proxy might).
      broken = createServer((req, res) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`upstream broke for ${req.headers.authorization ?? 'nobody'}`);
      });
      await new Promise<void>((r) => broken.listen(0, '127.0.0.1', r));
      brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      broken.closeAllConnections();
      await new Promise<void>((r) => broken.close(() => r()));
    });

    it('answers 502 naming the upstream address, never the token', async () => {
      const served = await serveMirror({ hub: brokenUrl, origins: [ggufOrigin] });
      const key = blobKey(ggufOrigin, ggufFile());
      const [a, b] = await Promise.all([get(served, key), get(served, key)]);
      for (const res of [a, b]) {
        expect(res.status).toBe(502);
        const { code, message } = res.json().error;
        expect(code).toBe('bad_gateway');
        expect(message).toContain(
          `the mirror could not fetch model-Q4_K_M.gguf of hf://org/model-GGUF/model-Q4_K_M.gguf from ${brokenUrl}/org/model-GGUF/resolve/${ggufOrigin.commit!}/model-Q4_K_M.gguf: `,
        );
        expect(message).not.toContain(token);
      }
      expect(served.logs()).not.toContain(token);
    });

    it('answers 502 when the upstream cannot be reached', async () => {
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const gone = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
      await new Promise<void>((r) => closed.close(() => r()));
      const served = await serveMirror({ hub: gone, origins: [stOrigin] });
      const res = await get(served, blobKey(stOrigin, configFile()));
      expect(res.status).toBe(502);
      expect(res.json().error.message).toContain(`from ${gone}/org/model/resolve/`);
    });
  });

  it('lists what it holds and purges an origin', async () => {
    const served = await serveMirror({ hub: hub.url, origins: [stOrigin, ggufOrigin] });
    for (const f of stOrigin.files) await get(served, blobKey(stOrigin, f));
    await get(served, blobKey(ggufOrigin, ggufFile()));
    await served.mirror.idle();
    const listed = await served.mirror.list([{ model: 'small', origin: stOrigin }]);
    const bytes = (o: Origin) => o.files.reduce((n, f) => n + f.size, 0);
    expect(listed).toMatchObject([
      {
        source: 'hf://org/model',
        snapshot: stOrigin.commit,
        models: ['small'],
        files: 3,
        bytes: bytes(stOrigin),
      },
      // Not named by the caller: the folder says which repository, not which file was asked for.
      {
        source: 'hf://org/model-GGUF',
        snapshot: ggufOrigin.commit,
        models: [],
        files: 1,
        bytes: gguf.length,
      },
    ]);
    expect(Date.parse(listed[0]!.last_used!)).toBeGreaterThan(Date.now() - 60_000);

    // Another commit of the repository links to the same tokenizer: that blob stays.
    const stPaths = (f: OriginFile) => filePaths(originLayout(served.dir, stOrigin)!, stOrigin, f);
    const tokenizer = stPaths(stOrigin.files.find((f) => f.path === 'tokenizer.json')!);
    const other = join(served.dir, 'models--org--model', 'snapshots', 'f'.repeat(40), 'tokenizer.json');
    mkdirSync(dirname(other), { recursive: true });
    symlinkSync(tokenizer.link, other);
    const shared = readFileSync(tokenizer.blob).length;
    expect(await served.mirror.purge(stOrigin)).toEqual({ files: 2, bytes: bytes(stOrigin) - shared });
    expect(readFileSync(other, 'utf8')).toBe('{"version":"1.0"}');
    expect(existsSync(stPaths(configFile()).blob)).toBe(false);
    rmSync(dirname(other), { recursive: true });
    expect(await served.mirror.purge(stOrigin)).toEqual({ files: 1, bytes: shared });
    expect(existsSync(join(served.dir, 'models--org--model'))).toBe(false);
    expect((await served.mirror.list()).map((e) => e.source)).toEqual(['hf://org/model-GGUF']);
  });
});
