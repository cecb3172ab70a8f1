import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { fakeLlamaServer } from '../../test/fakes/engines/fake-engines.js';
import { testEngines } from '../../test/support/assignments.js';
import type { EngineSettingsWire } from '../protocol/agent-protocol.js';

import type { InstalledLlama, LlamaInstallOptions } from './installer/index.js';
import { LlamaInstalls, type LlamaInstallsOptions } from './llama-install.js';

/** Runs the fake llama-server by absolute path (it imports its sibling modules). */
const wrapper = `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`;

let root: string;
let dataDir: string;
/** A directory for PATH that holds no llama-server unless a test puts one there. */
let pathDir: string;
const installs: LlamaInstallOptions[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'llmgw-llamabin-'));
  dataDir = join(root, 'data');
  pathDir = join(root, 'bin');
  await mkdir(dataDir);
  await mkdir(pathDir);
  installs.length = 0;
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function executable(path: string, body = wrapper): Promise<string> {
  await writeFile(path, body);
  await chmod(path, 0o755);
  return path;
}

/** A build the agent installed and checked, as the installer leaves it. */
async function installedBuild(build = 'b10587', flavour = 'cpu'): Promise<string> {
  const dir = join(dataDir, 'engines', 'llamacpp', `${build}-${flavour}`);
  await mkdir(dir, { recursive: true });
  const marker = {
    build,
    flavour,
    version: `${build}-3f545becc`,
    checksum: 'verified',
    sha256: '0'.repeat(64),
    source: 'http://mirror/llama.tar.gz',
    installed_at: '2026-12-01T00:00:00.000Z',
  };
  await writeFile(join(dir, '.llmgw-installed.json'), JSON.stringify(marker));
  return executable(join(dir, 'llama-server'));
}

/** LlamaInstalls with PATH at pathDir only, and the install each test gives it. */
function llama(o: Partial<LlamaInstallsOptions> = {}): { l: LlamaInstalls; settled: () => Promise<void> } {
  let wake: (() => void) | undefined;
  const l = new LlamaInstalls({
    dataDir,
    logger: pino({ level: 'silent' }),
    localBin: undefined,
    inventory: () => undefined,
    env: { PATH: pathDir, FAKE_LLAMA_DEVICES: '' },
    platform: 'linux',
    arch: 'x64',
    install: (opts) => {
      installs.push(opts);
      return Promise.reject(new Error('fetch failed: getaddrinfo ENOTFOUND github.com'));
    },
    onProgress: () => undefined,
    onSettled: () => wake?.(),
    ...o,
  });
  const settled = () =>
    new Promise<void>((resolve) => {
      wake = resolve;
    });
  return { l, settled };
}

const sent = (bin?: string): EngineSettingsWire => {
  const e = testEngines();
  return { ...e, llamacpp: { ...e.llamacpp, ...(bin === undefined ? {} : { bin }) } };
};

describe('the llama-server the agent runs', () => {
  it('runs the build it installed, over a configured bin, and downloads nothing', async () => {
    const bin = await installedBuild();
    const { l, settled } = llama({ localBin: '/opt/llama/llama-server' });
    const done = settled();
    expect(l.choose(sent(), undefined, true)).toEqual({
      waiting:
        'looking for a llama.cpp b10587-cpu the agent installed before running the configured /opt/llama/llama-server',
    });
    await done;
    expect(l.choose(sent(), undefined, true)).toMatchObject({
      bin,
      env: { LD_LIBRARY_PATH: join(bin, '..') },
    });
    expect(l.report().llamacpp).toMatchObject({
      source: 'installed',
      bin,
      build: 'b10587',
      flavour: 'cpu',
      why: `installed build b10587 (cpu) at ${bin}, which wins over the configured bin agent.engines.llamacpp.bin = /opt/llama/llama-server (this node's settings)`,
    });
    expect(installs).toEqual([]);
  });

  it("runs the configured bin when nothing is installed, the control plane's too, and installs nothing", async () => {
    await executable(join(pathDir, 'llama-server'));
    const { l, settled } = llama();
    const done = settled();
    expect(l.choose(sent('/opt/cp/llama-server'), undefined, true)).toHaveProperty('waiting');
    await done;
    expect(l.choose(sent('/opt/cp/llama-server'), undefined, true)).toEqual({ bin: '/opt/cp/llama-server' });
    expect(l.report().llamacpp).toEqual({
      source: 'configured',
      bin: '/opt/cp/llama-server',
      why: "configured: agent.engines.llamacpp.bin = /opt/cp/llama-server (the control plane's settings); the agent installs nothing",
    });
    expect(installs).toEqual([]);
  });

  it('tries its install first, and runs llama-server from PATH once it failed', async () => {
    const onPath = await executable(join(pathDir, 'llama-server'));
    const { l, settled } = llama();
    const done = settled();
    // While the install runs, shards wait for it, even with one on PATH.
    expect(l.choose(sent(), undefined, true)).toEqual({ waiting: 'installing llama.cpp b10587-cpu' });
    await done;
    expect(installs.map((i) => `${i.build}-${i.flavour}`)).toEqual(['b10587-cpu']);
    expect(l.choose(sent(), undefined, true)).toEqual({ bin: onPath });
    expect(l.report().llamacpp).toMatchObject({
      source: 'path',
      bin: onPath,
      why: `from PATH: ${onPath} (nothing installed or configured; the agent's install of llama.cpp b10587-cpu failed (fetch failed: getaddrinfo ENOTFOUND github.com; it is tried again in a minute))`,
      warning: 'install failed: fetch failed: getaddrinfo ENOTFOUND github.com',
    });
  });

  it('keeps running the one from PATH while its install is tried again, and the build once it is done', async () => {
    const onPath = await executable(join(pathDir, 'llama-server'));
    const bin = await executable(join(root, 'llama-server'));
    let finish: ((r: InstalledLlama) => void) | undefined;
    let tries = 0;
    const { l, settled } = llama({
      install: (opts) => {
        installs.push(opts);
        tries++;
        if (tries === 1) return Promise.reject(new Error('fetch failed: getaddrinfo ENOTFOUND github.com'));
        return new Promise((resolve) => (finish = resolve));
      },
    });
    const failedOnce = settled();
    l.choose(sent(), undefined, true);
    await failedOnce;
    expect(l.choose(sent(), undefined, true)).toEqual({ bin: onPath });
    // A minute later the install is tried again: PATH's llama-server goes on serving meanwhile.
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now + 61_000);
    try {
      expect(l.choose(sent(), undefined, true)).toEqual({ bin: onPath });
      expect(installs).toHaveLength(2);
      expect(l.report().llamacpp?.why).toBe(
        `from PATH: ${onPath} (nothing installed or configured; the agent's install of llama.cpp b10587-cpu failed (fetch failed: getaddrinfo ENOTFOUND github.com) and is being tried again)`,
      );
      const done = settled();
      finish?.({
        bin,
        build: 'b10587',
        flavour: 'cpu',
        version: 'b10587-3f545becc',
        devices: [],
        checksum: 'verified',
        reused: false,
      });
      await done;
      expect(l.choose(sent(), undefined, true)).toMatchObject({ bin });
    } finally {
      clock.mockRestore();
    }
  });

  it('refuses shards when the install failed and nothing is configured or on PATH', async () => {
    const { l, settled } = llama();
    const done = settled();
    l.choose(sent(), undefined, true);
    await done;
    const refusal =
      "no llama-server to run: the agent's install of llama.cpp b10587-cpu failed (fetch failed: getaddrinfo ENOTFOUND github.com; it is tried again in a minute), none is configured and PATH has none: set agent.engines.llamacpp.bin to a llama-server, or put one on PATH";
    expect(l.choose(sent(), undefined, true)).toEqual({ error: refusal });
    expect(l.report().llamacpp).toMatchObject({ source: 'none', why: refusal });
  });

  it('runs the build it installs once the install is done', async () => {
    const bin = await executable(join(root, 'llama-server'));
    const result: InstalledLlama = {
      bin,
      build: 'b10587',
      flavour: 'cpu',
      version: 'b10587-3f545becc',
      devices: [],
      checksum: 'verified',
      reused: false,
    };
    await executable(join(pathDir, 'llama-server'));
    const { l, settled } = llama({
      install: (opts) => {
        installs.push(opts);
        return Promise.resolve(result);
      },
    });
    const done = settled();
    l.choose(sent(), undefined, true);
    await done;
    expect(l.choose(sent(), undefined, true)).toMatchObject({ bin });
    expect(l.report().llamacpp).toMatchObject({
      source: 'installed',
      why: `installed build b10587 (cpu) at ${bin}`,
    });
  });

  it('installs nothing where llama.cpp publishes no build, and runs the one on PATH', async () => {
    const { l } = llama({ platform: 'darwin', arch: 'arm64' });
    expect(l.choose(sent(), undefined, true)).toEqual({
      error:
        'no llama-server to run: the agent cannot install llama.cpp here (llama.cpp publishes builds the agent installs for Linux x64 and arm64 only, and this node is darwin arm64), none is configured and PATH has none: set agent.engines.llamacpp.bin to a llama-server, or put one on PATH',
    });
    const onPath = await executable(join(pathDir, 'llama-server'));
    expect(l.choose(sent(), undefined, true)).toEqual({ bin: onPath });
    expect(installs).toEqual([]);
  });

  it('reports nothing while no llama.cpp process shard is assigned', () => {
    const { l } = llama({ localBin: '/opt/llama/llama-server' });
    expect(l.choose(sent(), undefined, false)).toEqual({});
    expect(l.report()).toEqual({});
    expect(installs).toEqual([]);
  });
});
