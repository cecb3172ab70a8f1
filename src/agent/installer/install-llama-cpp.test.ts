import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { c } from 'tar';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { fakeLlamaServer } from '../../../test/fakes/engines/fake-engines.js';

import {
  findInstalledLlama,
  installLlamaCpp,
  installedBuild,
  llamaEnv,
  type LlamaInstallOptions,
  type LlamaInstallProgress,
} from './index.js';

// --- archives: built here, as llama.cpp's release tarballs are laid out ---

const BUILD = 'b10587';
const ASSET = `llama-${BUILD}-bin-ubuntu-x64.tar.gz`;

/** Runs the fake llama-server by absolute path: it imports its sibling fake-openai-server.mjs. */
const wrapper = `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`;
const brokenServer =
  '#!/bin/sh\necho "./llama-server: error while loading shared libraries: libvulkan.so.1: cannot open shared object file" >&2\nexit 127\n';
const libsServer = [
  '#!/bin/sh',
  'case "$1" in',
  '  --version) echo "version: 0.2.0-dev (build 10587, commit 3f545becc)" >&2 ;;',
  '  --list-devices) echo "Available devices:"; echo "  Vulkan0: libs at $LD_LIBRARY_PATH" ;;',
  'esac',
  '',
].join('\n');

let stageRoot: string;

async function tarball(files: Record<string, string>): Promise<Buffer> {
  const stage = await mkdtemp(join(stageRoot, 'stage-'));
  for (const [path, body] of Object.entries(files)) {
    await mkdir(dirname(join(stage, path)), { recursive: true });
    await writeFile(join(stage, path), body);
    // Not executable on purpose for llama-server: the installer must make it so.
    await chmod(join(stage, path), 0o644);
  }
  const out = join(stage, 'out.tar.gz');
  const top = [...new Set(Object.keys(files).map((p) => p.split('/')[0] ?? p))];
  await c({ gzip: true, file: out, cwd: stage, portable: true }, top);
  return readFile(out);
}

const release = (server = wrapper) =>
  tarball({ [`llama-${BUILD}/llama-server`]: server, [`llama-${BUILD}/libggml.so`]: 'ELF' });
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

// --- a release site in the test ---

interface Route {
  status?: number;
  body?: Buffer | string;
  /** Held until this resolves, for overlapping requests. */
  wait?: Promise<void>;
  /** Send half the body, then hang or hang up. */
  half?: 'stall' | 'close';
}

let server: Server;
let site: string;
const routes = new Map<string, Route>();
const hits: string[] = [];
const authorizations: (string | undefined)[] = [];

function gets(path: string): number {
  return hits.filter((h) => h === `GET ${path}`).length;
}

beforeAll(async () => {
  stageRoot = await mkdtemp(join(tmpdir(), 'llmgw-installer-'));
  server = createServer((req, res) => {
    const path = req.url ?? '/';
    hits.push(`${req.method ?? 'GET'} ${path}`);
    authorizations.push(req.headers.authorization);
    const route = routes.get(path);
    void (route?.wait ?? Promise.resolve()).then(() => {
      if (route === undefined) {
        res.writeHead(404).end('Not Found');
        return;
      }
      const body = typeof route.body === 'string' ? Buffer.from(route.body) : (route.body ?? Buffer.alloc(0));
      res.writeHead(route.status ?? 200, {
        'Content-Length': body.length,
        'Content-Type': 'application/octet-stream',
      });
      if (route.half === undefined) {
        res.end(body);
        return;
      }
      res.write(body.subarray(0, body.length >> 1));
      if (route.half === 'close') setTimeout(() => res.destroy(), 50);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  site = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}/releases`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(stageRoot, { recursive: true, force: true });
});

let dataDir: string;
let events: LlamaInstallProgress[];

beforeEach(async () => {
  routes.clear();
  hits.length = 0;
  authorizations.length = 0;
  dataDir = await mkdtemp(join(stageRoot, 'data-'));
  events = [];
});

afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function options(over: Partial<LlamaInstallOptions> = {}): LlamaInstallOptions {
  return {
    build: BUILD,
    releaseUrl: site,
    flavour: 'cpu',
    arch: 'x64',
    dataDir,
    timeoutMs: 10_000,
    env: { ...process.env, FAKE_LLAMA_DEVICES: '' },
    onProgress: (p) => events.push(p),
    ...over,
  };
}

const base = () => join(dataDir, 'engines', 'llamacpp');
const target = (name = `${BUILD}-cpu`) => join(base(), name);
/** After a refusal: no target, no temporary file or directory, no lock. */
const leftovers = () => (existsSync(base()) ? readdirSync(base()) : []);

async function serveRelease(
  files?: Buffer,
  published: 'match' | 'mismatch' | 'none' = 'match',
  name = ASSET,
) {
  const body = files ?? (await release());
  routes.set(`/releases/${BUILD}/${name}`, { body });
  if (published === 'match')
    routes.set(`/releases/${BUILD}/${name}.sha256`, { body: `${sha256(body)}  ${name}\n` });
  if (published === 'mismatch')
    routes.set(`/releases/${BUILD}/${name}.sha256`, { body: `${'0'.repeat(64)}\n` });
  return body;
}

describe('installLlamaCpp', () => {
  it('downloads, verifies, unpacks and checks a release build', async () => {
    const body = await serveRelease();
    const got = await installLlamaCpp(options());

    expect(got).toEqual({
      bin: join(target(), 'llama-server'),
      build: BUILD,
      flavour: 'cpu',
      version: 'b10587-3f545becc',
      devices: [],
      checksum: 'verified',
      reused: false,
    });
    expect(statSync(got.bin).mode & 0o111).not.toBe(0);
    expect(readFileSync(join(target(), 'libggml.so'), 'utf8')).toBe('ELF');
    const marker = JSON.parse(readFileSync(join(target(), '.llmgw-installed.json'), 'utf8'));
    expect(marker).toMatchObject({
      build: BUILD,
      flavour: 'cpu',
      checksum: 'verified',
      sha256: sha256(body),
      source: `${site}/${BUILD}/${ASSET}`,
    });
    expect(leftovers()).toEqual([`${BUILD}-cpu`]);

    const phases = [...new Set(events.map((e) => e.phase))];
    expect(phases).toEqual(['download', 'verify', 'unpack', 'check']);
    const progress = events.filter((e) => e.received !== undefined);
    expect(progress.at(0)).toEqual({ phase: 'download', received: 0, total: body.length });
    expect(progress.at(-1)).toEqual({ phase: 'download', received: body.length, total: body.length });
  });

  it('installs unverified, and says so, when no checksum is published', async () => {
    await serveRelease(undefined, 'none');
    const got = await installLlamaCpp(options());
    expect(got.checksum).toBe('not published');
    expect(events.find((e) => e.phase === 'verify')?.message).toMatch(
      /no SHA-256 is published at .*\.sha256/,
    );
  });

  it('reuses an installed build, still listing its devices', async () => {
    await serveRelease();
    await installLlamaCpp(options());
    const again = await installLlamaCpp(
      options({
        env: { ...process.env, FAKE_LLAMA_DEVICES: 'Vulkan0: NVIDIA L4 (22994 MiB, 22713 MiB free)' },
      }),
    );
    expect(again).toMatchObject({
      reused: true,
      checksum: 'verified',
      version: 'b10587-3f545becc',
      devices: ['Vulkan0: NVIDIA L4 (22994 MiB, 22713 MiB free)'],
    });
    expect(gets(`/releases/${BUILD}/${ASSET}`)).toBe(1);
  });

  it('finds an installed build without downloading, and none before it is installed', async () => {
    await serveRelease();
    expect(await findInstalledLlama(options())).toBeUndefined();
    expect(installedBuild(dataDir, BUILD, 'cpu')).toBeUndefined();
    expect(hits).toEqual([]);
    const first = await installLlamaCpp(options());
    const found = await findInstalledLlama(options());
    expect(found).toMatchObject({ bin: first.bin, build: BUILD, flavour: 'cpu', reused: true });
    expect(installedBuild(dataDir, BUILD, 'cpu')).toEqual({
      bin: first.bin,
      build: BUILD,
      flavour: 'cpu',
      version: 'b10587-3f545becc',
    });
    // Another build or flavour is not this one.
    expect(installedBuild(dataDir, 'b10588', 'cpu')).toBeUndefined();
    expect(installedBuild(dataDir, BUILD, 'vulkan')).toBeUndefined();
    expect(gets(`/releases/${BUILD}/${ASSET}`)).toBe(1);
  });

  it('parses the devices the build lists', async () => {
    await serveRelease();
    const got = await installLlamaCpp(
      options({
        env: {
          ...process.env,
          FAKE_LLAMA_DEVICES:
            'CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free);CUDA1: NVIDIA L4 (22994 MiB, 22713 MiB free)',
        },
      }),
    );
    expect(got.devices).toEqual([
      'CUDA0: NVIDIA L4 (22994 MiB, 22713 MiB free)',
      'CUDA1: NVIDIA L4 (22994 MiB, 22713 MiB free)',
    ]);
  });

  it('refuses a download that does not match its published SHA-256, leaving nothing', async () => {
    const body = await serveRelease(undefined, 'mismatch');
    await expect(installLlamaCpp(options())).rejects.toThrow(
      `the download of ${site}/${BUILD}/${ASSET} does not match its published SHA-256: expected ${'0'.repeat(64)}, got ${sha256(body)}; nothing was installed`,
    );
    expect(leftovers()).toEqual([]);
  });

  it('prefers a pinned SHA-256 to the published one', async () => {
    const body = await serveRelease(undefined, 'mismatch');
    const got = await installLlamaCpp(options({ sha256: sha256(body).toUpperCase() }));
    expect(got.checksum).toBe('verified');
    expect(gets(`/releases/${BUILD}/${ASSET}.sha256`)).toBe(0);

    await rm(base(), { recursive: true });
    await expect(installLlamaCpp(options({ sha256: 'a'.repeat(64) }))).rejects.toThrow(
      /does not match the SHA-256 pinned for it: expected a{64}, got [0-9a-f]{64}; nothing was installed/,
    );
    expect(leftovers()).toEqual([]);
  });

  it("sends a mirror's credentials as basic auth, and never writes them down", async () => {
    await serveRelease();
    const mirror = site.replace('http://', 'http://agent:s3cret@');
    const got = await installLlamaCpp(options({ releaseUrl: mirror }));
    expect(got.checksum).toBe('verified');
    expect(authorizations[0]).toBe(`Basic ${Buffer.from('agent:s3cret').toString('base64')}`);
    expect(readFileSync(join(target(), '.llmgw-installed.json'), 'utf8')).not.toContain('s3cret');

    const err = await installLlamaCpp(options({ build: 'b99999', releaseUrl: mirror })).catch(
      (e: unknown) => e,
    );
    expect((err as Error).message).toContain('//agent:[redacted]@127.0.0.1');
    expect((err as Error).message).not.toContain('s3cret');
  });

  it('says which setting to check when the asset does not exist', async () => {
    const err = await installLlamaCpp(options({ build: 'b99999' })).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'not_found',
      message: `${site}/b99999/llama-b99999-bin-ubuntu-x64.tar.gz answered 404: no such asset: check agent.engines.llamacpp.build (e.g. b10587) or the release address agent.engines.llamacpp.release_url`,
    });
    expect(leftovers()).toEqual([]);
  });

  it('says where to point when the release address cannot be reached', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const address = closed.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    await new Promise((resolve) => closed.close(resolve));

    const err = await installLlamaCpp(options({ releaseUrl: `http://127.0.0.1:${port}/mirror/` })).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'unavailable' });
    expect((err as Error).message).toMatch(
      new RegExp(
        `^could not download http://127\\.0\\.0\\.1:${port}/mirror/${BUILD}/${ASSET.replaceAll('.', '\\.')}: ECONNREFUSED .*: set agent\\.engines\\.llamacpp\\.release_url to a mirror this node reaches, or agent\\.engines\\.llamacpp\\.bin to an installed llama-server$`,
      ),
    );
    expect(leftovers()).toEqual([]);
  });

  it.each([
    [
      'stall',
      /the download of .* broke off: nothing arrived for 0\.3 s: try again, or set agent\.engines\.llamacpp\.release_url/,
    ],
    [
      'close',
      /the download of .* (broke off|ended after \d+ of \d+ bytes).*: try again, or set agent\.engines\.llamacpp\.release_url/,
    ],
  ] as const)('gives up on a download that %ss, leaving nothing', async (half, message) => {
    const body = await serveRelease();
    routes.set(`/releases/${BUILD}/${ASSET}`, { body, half });
    await expect(installLlamaCpp(options({ timeoutMs: 300 }))).rejects.toThrow(message);
    expect(leftovers()).toEqual([]);
  });

  it('refuses a build old enough to ship .zip archives', async () => {
    routes.set('/releases/b6558/llama-b6558-bin-ubuntu-x64.zip', { body: 'PK\x03\x04' });
    await expect(installLlamaCpp(options({ build: 'b6558' }))).rejects.toThrow(
      /the release has llama-b6558-bin-ubuntu-x64\.zip and no \.tar\.gz: llama\.cpp b6558 predates its \.tar\.gz archives for Linux.*set agent\.engines\.llamacpp\.build to a newer build \(e\.g\. b10587\), or agent\.engines\.llamacpp\.bin/,
    );
    expect(leftovers()).toEqual([]);
  });

  it('refuses a .zip served under a .tar.gz name', async () => {
    await serveRelease(Buffer.from('PK\x03\x04zip of build/bin/llama-server', 'latin1'), 'none');
    await expect(installLlamaCpp(options())).rejects.toThrow(
      /is a \.zip archive: llama\.cpp b10587 predates its \.tar\.gz archives/,
    );
    expect(leftovers()).toEqual([]);
  });

  it('refuses a tarball without llama-server, leaving nothing', async () => {
    await serveRelease(
      await tarball({ [`llama-${BUILD}/llama-cli`]: wrapper, [`llama-${BUILD}/libggml.so`]: 'ELF' }),
    );
    await expect(installLlamaCpp(options())).rejects.toThrow(
      `${site}/${BUILD}/${ASSET} holds no llama-server (it has llama-${BUILD}); nothing was installed`,
    );
    expect(leftovers()).toEqual([]);
  });

  it('finds llama-server in the build/bin/ of older archives', async () => {
    await serveRelease(await tarball({ 'build/bin/llama-server': wrapper, 'build/bin/libllama.so': 'ELF' }));
    const got = await installLlamaCpp(options());
    expect(got.bin).toBe(join(target(), 'llama-server'));
    expect(existsSync(join(target(), 'libllama.so'))).toBe(true);
  });

  it('refuses a build that does not run here, with what it printed', async () => {
    await serveRelease(await release(brokenServer));
    await expect(installLlamaCpp(options())).rejects.toThrow(
      /llama-server does not run on this machine: .*error while loading shared libraries: libvulkan\.so\.1.*; try another flavour or set agent\.engines\.llamacpp\.bin/,
    );
    expect(leftovers()).toEqual([]);
  });

  it('runs the build with its own directory on LD_LIBRARY_PATH', async () => {
    await serveRelease(await release(libsServer));
    await installLlamaCpp(options({ env: { ...process.env, LD_LIBRARY_PATH: '/opt/elsewhere' } }));
    const again = await installLlamaCpp(
      options({ env: { ...process.env, LD_LIBRARY_PATH: '/opt/elsewhere' } }),
    );
    expect(again.devices).toEqual([`Vulkan0: libs at ${target()}:/opt/elsewhere`]);
    expect(llamaEnv(again.bin, {})).toEqual({ LD_LIBRARY_PATH: target() });
  });

  it('installs again over a build that stopped running', async () => {
    await serveRelease();
    await installLlamaCpp(options());
    await writeFile(join(target(), 'llama-server'), brokenServer);
    const got = await installLlamaCpp(options());
    expect(got.reused).toBe(false);
    expect(gets(`/releases/${BUILD}/${ASSET}`)).toBe(2);
    expect(events.some((e) => /no longer runs/.test(e.message ?? ''))).toBe(true);
    expect(leftovers()).toEqual([`${BUILD}-cpu`]);
  });

  it('shares one download between concurrent installs', async () => {
    let release_: () => void = () => undefined;
    const wait = new Promise<void>((resolve) => (release_ = resolve));
    const body = await serveRelease();
    routes.set(`/releases/${BUILD}/${ASSET}`, { body, wait });
    const second: LlamaInstallProgress[] = [];
    const both = Promise.all([
      installLlamaCpp(options()),
      installLlamaCpp(options({ onProgress: (p) => second.push(p) })),
    ]);
    release_();
    const [a, b] = await both;
    expect(a).toEqual(b);
    expect(gets(`/releases/${BUILD}/${ASSET}`)).toBe(1);
    expect(second.some((p) => p.phase === 'check')).toBe(true);
  });

  it('waits for another process holding the install lock', async () => {
    await serveRelease();
    await mkdir(base(), { recursive: true });
    const lock = join(base(), `.${BUILD}-cpu.lock`);
    // A live holder on this host: this process's parent (this very pid would be an earlier process's lock).
    await writeFile(
      lock,
      JSON.stringify({ pid: process.ppid, host: (await import('node:os')).hostname(), token: 'other' }),
    );
    const pending = installLlamaCpp(options());
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(gets(`/releases/${BUILD}/${ASSET}`)).toBe(0);
    expect(
      events.some((e) =>
        /waiting for process \d+ on .* installing llama\.cpp b10587-cpu/.test(e.message ?? ''),
      ),
    ).toBe(true);
    await rm(lock);
    expect((await pending).reused).toBe(false);
    expect(leftovers()).toEqual([`${BUILD}-cpu`]);
  });

  it('installs an operator CUDA archive', async () => {
    const body = await release();
    routes.set('/cuda/llama-b10587-cuda-12.8-x64.tar.gz', { body });
    const cudaArchive = site.replace('/releases', '/cuda/llama-b10587-cuda-12.8-x64.tar.gz');
    const got = await installLlamaCpp(
      options({
        flavour: 'cuda',
        cudaArchive,
        env: { ...process.env, FAKE_LLAMA_DEVICES: 'CUDA0: NVIDIA H100 (81559 MiB, 81000 MiB free)' },
      }),
    );
    expect(got).toMatchObject({
      bin: join(target(`${BUILD}-cuda`), 'llama-server'),
      flavour: 'cuda',
      checksum: 'not published',
      devices: ['CUDA0: NVIDIA H100 (81559 MiB, 81000 MiB free)'],
    });

    // Another archive at another address is another build, whatever its tag.
    routes.set('/cuda/other.tar.gz', { body });
    const other = await installLlamaCpp(
      options({ flavour: 'cuda', cudaArchive: site.replace('/releases', '/cuda/other.tar.gz') }),
    );
    expect(other.reused).toBe(false);
  });

  it.each([
    [
      { flavour: 'cuda' as const },
      /publishes no Linux CUDA build: set agent\.engines\.llamacpp\.cuda_archive/,
    ],
    [
      { flavour: 'cuda' as const, cudaArchive: 'https://mirror.example/llama-cuda.zip' },
      /a \.zip: llmgw unpacks \.tar\.gz archives only/,
    ],
    [
      { flavour: 'cuda' as const, cudaArchive: '/srv/llama-cuda.tar.gz' },
      /not a URL: give the http\(s\) address/,
    ],
    [{ flavour: 'vulkan' as const, arch: 'arm64' }, /Vulkan build for x64 only, and this node is arm64/],
    [{ build: '../b1' }, /not a llama\.cpp release tag/],
    [{ sha256: 'abc' }, /not a SHA-256 digest/],
  ])('refuses %o before downloading anything', async (over, message) => {
    await expect(installLlamaCpp(options(over))).rejects.toThrow(message);
    expect(hits).toEqual([]);
    expect(leftovers()).toEqual([]);
  });
});
