import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { isRunning, listProcesses } from '../src/agent/shards/process/process-tree.js';
import type { Origin } from '../src/models/origin.js';

import { qwen25_7b, tinyTensors } from './fakes/gguf/models.js';
import { writeGguf } from './fakes/gguf/writer.js';
import { startFakeHub } from './fakes/hub/hub.js';

import { llmgw, repoRoot, startDaemon, type Daemon } from './support/cli.js';
import { recordingLlamaServer, replicas, until } from './support/fleet.js';
import { localModel } from './support/local-model.js';

const noGpu = {
  LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
  LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
};
const modeOf = (p: string) => `0${(statSync(p).mode & 0o777).toString(8)}`;

/** A data dir and settings for `llmgw up` with one CPU model, whose llama-server is the fake. */
function cluster(): { dir: string; config: string; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-up-'));
  mkdirSync(join(dir, 'rec'));
  const rec = recordingLlamaServer(join(dir, 'rec'));
  localModel(dir, 'tiny.safetensors');
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    [
      'listen: 127.0.0.1:0',
      'agent:',
      '  heartbeat_ms: 300',
      '  stop_grace_s: 5',
      '  engines:',
      '    llamacpp:',
      `      bin: ${rec.bin}`,
      'models:',
      `  - {name: tiny, source: ${join(dir, 'tiny.safetensors')}, profiles: [{name: cpu, engine: llamacpp, cpu: true}]}`,
      '',
    ].join('\n'),
  );
  return {
    dir,
    config,
    env: { XDG_CONFIG_HOME: join(dir, 'xdg'), LLMGW_DATA_DIR: join(dir, 'data'), ...noGpu },
  };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** `llmgw up` in `dir`, stopped after the test whatever happens: SIGTERM, then SIGKILL if it hangs. */
function startUp(args: string[], env: Record<string, string>, dir: string): Daemon {
  const d = startDaemon(args, env, dir);
  cleanups.push(async () => {
    if (d.child.exitCode !== null || d.child.signalCode !== null) return;
    const timer = setTimeout(() => d.child.kill('SIGKILL'), 15_000);
    await d.stop('SIGTERM');
    clearTimeout(timer);
  });
  return d;
}

describe('llmgw up keeps its files to its owner', () => {
  it('data dir 0700; database, its -wal and -shm, the node credential and the saved login 0600', async () => {
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const up = startUp(['up', '-c', config], env, dir);
    try {
      await up.waitFor(/logged in with it/);
      await until('a ready replica of tiny', async () =>
        (await replicas(env, 'tiny')).find((r) => r.state === 'ready'),
      );
      const data = join(dir, 'data');
      expect(modeOf(data)).toBe('0700');
      for (const f of ['llmgw.db', 'llmgw.db-wal', 'llmgw.db-shm', join('agent', 'node.json')])
        expect([f, modeOf(join(data, f))]).toEqual([f, '0600']);
      expect(modeOf(join(dir, 'xdg', 'llmgw'))).toBe('0700');
      expect(modeOf(join(dir, 'xdg', 'llmgw', 'ctl.json'))).toBe('0600');
    } finally {
      expect(await up.stop('SIGTERM')).toBe(0);
    }

    // Left open by an older llmgw, or a copy: put right at the next start, saying so.
    chmodSync(join(dir, 'data'), 0o755);
    chmodSync(join(dir, 'data', 'llmgw.db'), 0o644);
    const again = startUp(['up', '-c', config], env, dir);
    try {
      await again.waitFor(/control plane listening/);
      expect(modeOf(join(dir, 'data'))).toBe('0700');
      expect(modeOf(join(dir, 'data', 'llmgw.db'))).toBe('0600');
      const warnings = again
        .output()
        .split('\n')
        .filter((l) => l.includes('was open to other users'))
        .map((l) => JSON.parse(l) as { level: string; msg: string });
      expect(warnings).toEqual([
        expect.objectContaining({
          level: 'warn',
          msg: `${join(dir, 'data')} was open to other users (mode 0755): made it 0700`,
        }),
        expect.objectContaining({
          level: 'warn',
          msg: `${join(dir, 'data', 'llmgw.db')} was open to other users (mode 0644): made it 0600`,
        }),
      ]);
    } finally {
      expect(await again.stop('SIGTERM')).toBe(0);
    }
  });

  it('leaves the mode of a data dir it did not make, saying the chmod to run, then and after an upgrade', async () => {
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o755 });
    chmodSync(data, 0o755);
    const warning = `${data} is open to other users (mode 0755); llmgw did not create it, so it leaves its mode alone: chmod 700 ${data}`;
    for (const run of ['empty', 'holding what llmgw keeps, as an older llmgw left it']) {
      const up = startUp(['up', '-c', config], env, dir);
      try {
        await up.waitFor(/control plane listening/);
        const warned = up
          .output()
          .split('\n')
          .filter((l) => l.includes('open to other users'))
          .map((l) => (JSON.parse(l) as { msg: string }).msg);
        expect([run, warned]).toEqual([run, [warning]]);
        expect(modeOf(data)).toBe('0755');
        // What it creates there is its owner's alone all the same.
        expect(modeOf(join(data, 'llmgw.db'))).toBe('0600');
        expect(existsSync(join(data, '.llmgw-data-dir'))).toBe(false);
      } finally {
        expect(await up.stop('SIGTERM')).toBe(0);
      }
    }
  });

  it('saves the login of llmgw ctl login 0600 in a directory of its own 0700, and puts an open one right', async () => {
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const up = startUp(
      ['up', '-c', config],
      { ...env, LLMGW_ADMIN_KEY: 'up-test-admin-key-0123456789abcdef' },
      dir,
    );
    try {
      const url = (await up.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
      const xdg = join(dir, 'login');
      const login = await llmgw(
        ['ctl', 'login', '--server', url, '--key', 'up-test-admin-key-0123456789abcdef'],
        { XDG_CONFIG_HOME: xdg },
      );
      expect(login.code).toBe(0);
      expect(modeOf(join(xdg, 'llmgw'))).toBe('0700');
      expect(modeOf(join(xdg, 'llmgw', 'ctl.json'))).toBe('0600');
      chmodSync(join(xdg, 'llmgw', 'ctl.json'), 0o644);
      const models = await llmgw(['ctl', 'models'], { XDG_CONFIG_HOME: xdg });
      expect(models.code).toBe(0);
      expect(models.stderr).toBe(
        `note: ${join(xdg, 'llmgw', 'ctl.json')} was open to other users (mode 0644): made it 0600 (it holds an API key)\n`,
      );
      expect(modeOf(join(xdg, 'llmgw', 'ctl.json'))).toBe('0600');
    } finally {
      expect(await up.stop('SIGTERM')).toBe(0);
    }
  });
});

describe('llmgw up and signals', () => {
  it('refuses a second llmgw up on the same data dir, and leaves the first one running', async () => {
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const first = startUp(['up', '-c', config], env, dir);
    try {
      await first.waitFor(/joined the cluster/);
      const second = await llmgw(['up', '-c', config], env);
      expect(second.code).toBe(1);
      expect(second.stderr).toBe(
        `error: the SQLite database ${join(dir, 'data', 'llmgw.db')} is in use by another llmgw (pid ${first.child.pid ?? 0} on ${hostname()}): stop that one first, or give this one a data dir of its own (--config, or LLMGW_DATA_DIR); control planes share a PostgreSQL database, not an SQLite one\n`,
      );
      const agent = await llmgw(['agent', '--server', 'http://127.0.0.1:9', '--token', 'llmgw_join_x'], env);
      expect(agent.code).toBe(1);
      expect(agent.stderr).toBe(
        `error: the data dir ${join(dir, 'data')} is in use by the agent of another llmgw (pid ${first.child.pid ?? 0} on ${hostname()}): stop that one first, or give this one a data dir of its own (LLMGW_DATA_DIR)\n`,
      );
      expect((await replicas(env, 'tiny')).length).toBe(1);
    } finally {
      expect(await first.stop('SIGTERM')).toBe(0);
    }
    // Once it has stopped, the next one starts.
    const next = startUp(['up', '-c', config], env, dir);
    // Its node joined before, with this data dir: it comes back on its credential.
    await next.waitFor(/connected to the control plane/);
    expect(await next.stop('SIGTERM')).toBe(0);
  });

  it('exits 1, leaving nothing listening, when its agent cannot start', async () => {
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(join(dir, 'data', 'agent'), { recursive: true });
    writeFileSync(join(dir, 'data', 'agent', 'node.json'), 'not json');
    const r = await llmgw(['up', '-c', config], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `error: ${join(dir, 'data', 'agent', 'node.json')} is not a node identity: move it away to join as a new node\n`,
    );
    expect(r.stdout).toContain('control plane stopped');
  });

  it('stops cleanly, exit 0, on a SIGTERM that comes while it is still starting', async () => {
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const up = startUp(['up', '-c', config], env, dir);
    await up.waitFor(/control plane listening/);
    expect(await up.stop('SIGTERM')).toBe(0);
    expect(up.output()).toContain('control plane stopped');
  });
});

/** The node process running `llmgw up` under npx: in npx's process group, not its shell. */
function llmgwUnder(npx: ChildProcess): number | undefined {
  for (const p of listProcesses()) {
    if (p.pgrp !== npx.pid || p.pid === npx.pid) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (/(^|\/)node$/.test(argv[0] ?? '') && argv.some((a) => a.endsWith('/llmgw')) && argv.includes('up'))
      return p.pid;
  }
  return undefined;
}

describe("the README's start command, npx llmgw up, stops with its engines", () => {
  it.each([
    ['SIGTERM to the npx process', 'npx'],
    ['Ctrl-C (SIGINT to the process group)', 'group'],
  ] as const)('on %s', async (_, target) => {
    const { dir, config, env } = cluster();
    // npx installs the package into a cache of its own (a link to this checkout). Offline and
    // without scripts, as the checkout is built already: `prepare` would rebuild it under the other tests.
    const npx = spawn('npx', ['--offline', '--ignore-scripts', 'llmgw', 'up', '-c', config], {
      cwd: repoRoot,
      detached: true,
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: dir,
        npm_config_cache: join(dir, 'npm-cache'),
        npm_config_update_notifier: 'false',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npx.stdout.on('data', (d: Buffer) => (out += d.toString()));
    npx.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => npx.on('exit', () => resolve()));
    const pids: number[] = [];
    cleanups.push(async () => {
      // A test that failed leaves its processes: asked to stop first, so that llmgw stops its engines.
      const group = () => listProcesses().filter((p) => p.pgrp === npx.pid);
      for (const p of group()) process.kill(p.pid, 'SIGTERM');
      await until(
        'the npx process group gone',
        () => (group().length === 0 ? true : undefined),
        15_000,
      ).catch(() => undefined);
      for (const pid of [...group().map((p) => p.pid), ...pids])
        if (isRunning(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });

    const replica = await until(
      'a ready replica of tiny',
      async () => (await replicas(env, 'tiny')).find((r) => r.state === 'ready'),
      45_000,
    ).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\nnpx output:\n${out}`);
    });
    const engine = replica.shards[0]?.pid;
    const up = llmgwUnder(npx);
    expect(engine).toBeGreaterThan(0);
    expect(up).toBeGreaterThan(0);
    pids.push(up!, engine!);

    if (target === 'npx') process.kill(npx.pid!, 'SIGTERM');
    else process.kill(-npx.pid!, 'SIGINT');
    await exited;
    await until(
      'llmgw and its engine gone',
      () => (isRunning(up!) || isRunning(engine!) ? undefined : true),
      20_000,
    ).catch((e: unknown) => {
      throw new Error(
        `${e instanceof Error ? e.message : String(e)} (llmgw ${isRunning(up!) ? 'running' : 'gone'}, engine ${isRunning(engine!) ? 'running' : 'gone'})\noutput:\n${out}`,
      );
    });
    expect(out).toContain('control plane stopped');
  });
});

describe('llmgw up with a model from the hub', () => {
  it('resolves it, fetches it through its mirror into the cache, and serves it from local files', async () => {
    const file = writeGguf({ metadata: qwen25_7b, tensors: tinyTensors(512 * 1024) });
    const hub = await startFakeHub({ repos: { 'org/tiny-GGUF': { files: { 'tiny-Q4_K_M.gguf': file } } } });
    cleanups.push(() => hub.close());
    const { dir, config, env } = cluster();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const rec = recordingLlamaServer(join(dir, 'rec'));
    writeFileSync(
      config,
      readFileSync(config, 'utf8')
        .replace(`source: ${join(dir, 'tiny.safetensors')}`, 'source: hf://org/tiny-GGUF/tiny-Q4_K_M.gguf')
        .replace('agent:', `hub:\n  endpoint: ${hub.url}\nagent:`),
    );
    const up = startUp(['up', '-c', config], env, dir);
    try {
      await up.waitFor(/logged in with it/);
      const ready = await until('a ready replica of tiny', async () =>
        (await replicas(env, 'tiny')).find((r) => r.state === 'ready'),
      );
      expect(ready.state).toBe('ready');

      const show = await llmgw(['ctl', 'model', 'show', 'tiny', '--json'], env);
      expect(show.code).toBe(0);
      const origin = (JSON.parse(show.stdout) as { status: { origin: Origin } }).status.origin;
      expect(origin.commit).toMatch(/^[0-9a-f]{40}$/);
      const sha = createHash('sha256').update(file).digest('hex');
      expect(origin.files).toEqual([{ path: 'tiny-Q4_K_M.gguf', size: file.length, sha256: sha }]);

      // The engine was given the file in the node's cache, and told to fetch nothing.
      const data = join(dir, 'data');
      const local = join(data, 'models', 'hub', 'models--org--tiny-GGUF', 'snapshots', origin.commit ?? '');
      const launch = rec.launches()[0];
      expect(launch?.args[launch.args.indexOf('--model') + 1]).toBe(join(local, 'tiny-Q4_K_M.gguf'));
      expect(launch?.env['HF_HUB_OFFLINE']).toBe('1');
      expect(readFileSync(join(local, 'tiny-Q4_K_M.gguf')).equals(file)).toBe(true);
      // Fetched through the control plane's mirror, which keeps it in the same layout.
      expect(statSync(join(data, 'mirror', 'models--org--tiny-GGUF', 'blobs', sha)).size).toBe(file.length);
      const bodies = hub.requests.filter(
        (r) => r.method === 'GET' && r.range === undefined && r.url.includes(sha),
      );
      expect(bodies.length).toBeLessThanOrEqual(1);
    } finally {
      expect(await up.stop('SIGTERM')).toBe(0);
    }
  });
});
