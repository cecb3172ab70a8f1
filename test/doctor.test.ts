import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { markDataDir } from '../src/config/data-dir.js';

import { llmgwBin, type RunResult } from './support/cli.js';
import { api, startControlPlane, type TestControlPlane } from './support/control-plane.js';

/** A port nothing listens on: one the OS gave out, then closed. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as { port: number };
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** An executable script at `path` (a llama-server the doctor only looks at, never runs). */
function script(path: string): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, '#!/bin/sh\nexit 0\n');
  chmodSync(path, 0o755);
  return path;
}

/**
 * `llmgw doctor --json` as an operator runs it on a node, in a working directory and home of
 * its own, on a machine without NVIDIA software (so the agent would run llama.cpp, which it
 * installs), with a PATH of its own: `cwd/bin`, empty unless a test puts something there.
 */
function doctor(
  cwd: string,
  args: string[] = [],
  env: Record<string, string> = {},
  json = true,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [llmgwBin, 'doctor', ...(json ? ['--json'] : []), ...args], {
      cwd,
      env: {
        PATH: join(cwd, 'bin'),
        LLMGW_AGENT_ENGINES_LLAMACPP_BUILD: 'b10587',
        HOME: join(cwd, 'home'),
        LLMGW_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
        LLMGW_NVIDIA_SMI: '/nonexistent/nvidia-smi',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('llmgw doctor', () => {
  let cp: TestControlPlane;
  let token: string;
  const dirs: string[] = [];
  const cwd = () => {
    const d = mkdtempSync(join(tmpdir(), 'llmgw-doctor-'));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    cp = await startControlPlane();
    const created = await api(cp.url, cp.adminKey, 'POST', '/node-tokens', { name: 'doctor' });
    token = created.body.secret as string;
  });
  afterAll(async () => {
    await cp.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('writes nothing: no data dir in the working directory, nothing in HOME', async () => {
    const dir = cwd();
    const r = await doctor(dir);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.host.disk.path).toBe(join(dir, '.llmgw'));
    expect(readdirSync(dir)).toEqual([]);
  });

  it('exits 0 when the node can serve: llama.cpp is installed by the agent, the control plane takes the token', async () => {
    const r = await doctor(cwd(), ['--server', cp.url, '--token', token]);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.engines[0]).toMatchObject({ name: 'llama-server', found: false, installs: true });
    expect(report.warnings).toEqual([]);
    expect(report.control_plane).toMatchObject({
      reachable: true,
      token: { accepted: true, name: 'doctor' },
    });
  });

  it('exits 1 when the control plane refuses the join token', async () => {
    const r = await doctor(cwd(), ['--server', cp.url, '--token', 'llmgw_join_wrongwrongwrongwrongwrong']);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).warnings).toEqual([
      {
        code: 'token_refused',
        message: expect.stringContaining(
          'the control plane refuses the join token: the join token is not valid',
        ),
        blocking: true,
      },
    ]);
  });

  it('exits 1 when the control plane does not answer', async () => {
    const port = await closedPort();
    const r = await doctor(cwd(), ['--server', `http://127.0.0.1:${port}`]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).warnings).toEqual([
      {
        code: 'control_plane_unreachable',
        message: expect.stringMatching(
          new RegExp(
            `^the control plane at http://127\\.0\\.0\\.1:${port} does not answer \\(.+\\): check the URL, the network and its firewall$`,
          ),
        ),
        blocking: true,
      },
    ]);
  });

  it('exits 1 when no engine can run, and says which setting to fix', async () => {
    const dir = cwd();
    const r = await doctor(dir, [], { LLMGW_AGENT_ENGINES_LLAMACPP_BIN: '/nonexistent/llama-server' });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).warnings).toEqual([
      {
        code: 'no_engine',
        message: expect.stringMatching(
          /^nothing can run on this node: llama-server: agent\.engines\.llamacpp\.bin is \/nonexistent\/llama-server, which does not exist or cannot run, and it has no GPU: set agent\.engines\.llamacpp\.bin/,
        ),
        blocking: true,
      },
    ]);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('says the agent installs llama.cpp first and falls back on the llama-server on PATH', async () => {
    const dir = cwd();
    const onPath = script(join(dir, 'bin', 'llama-server'));
    const r = await doctor(dir, [], {}, false);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      `llama-server  not installed yet: the agent installs llama.cpp b10587-cpu when a llama.cpp replica is placed here; should that fail, it runs ${onPath} from PATH`,
    );
  });

  it('says the configured bin runs when nothing is installed', async () => {
    const dir = cwd();
    const bin = script(join(dir, 'opt', 'llama-server'));
    const r = await doctor(dir, [], { LLMGW_AGENT_ENGINES_LLAMACPP_BIN: bin });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).engines[0]).toEqual({
      name: 'llama-server',
      found: true,
      path: bin,
      source: 'configured',
      detail: `configured: agent.engines.llamacpp.bin = ${bin} (this node's settings); the agent installs nothing`,
    });
  });

  it('says the build the agent installed runs, over the configured bin', async () => {
    const dir = cwd();
    const build = join(dir, '.llmgw', 'engines', 'llamacpp', 'b10587-cpu');
    const installed = script(join(build, 'llama-server'));
    // As the agent left it: a data dir llmgw made.
    markDataDir(join(dir, '.llmgw'));
    writeFileSync(
      join(build, '.llmgw-installed.json'),
      JSON.stringify({
        build: 'b10587',
        flavour: 'cpu',
        version: 'b10587-3f545becc',
        checksum: 'verified',
        sha256: '0'.repeat(64),
        source: 'http://mirror/llama.tar.gz',
        installed_at: '2026-12-01T00:00:00.000Z',
      }),
    );
    const bin = script(join(dir, 'opt', 'llama-server'));
    const r = await doctor(dir, [], { LLMGW_AGENT_ENGINES_LLAMACPP_BIN: bin }, false);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      `llama-server  installed build b10587 (cpu) at ${installed}, which wins over the configured bin agent.engines.llamacpp.bin = ${bin} (this node's settings)`,
    );
  });

  it('refuses a join token without the control plane to check it against (exit 2)', async () => {
    const dir = cwd();
    const r = await doctor(dir, ['--token', token]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      '{"error":{"code":"invalid_argument","message":"a join token is checked by the control plane that made it: give it too, llmgw doctor --server URL --token TOKEN"}}\n',
    );
    expect(readdirSync(dir)).toEqual([]);
  });

  it('says so in the human report: the engine it will install, and why it cannot serve', async () => {
    const human = await doctor(
      cwd(),
      ['--server', cp.url, '--token', 'llmgw_join_wrongwrongwrongwrongwrong'],
      {},
      false,
    );
    expect(human.code).toBe(1);
    expect(human.stdout).toContain(
      'llama-server  not installed yet: the agent installs llama.cpp b10587-cpu when a llama.cpp replica is placed here; PATH has no llama-server to fall back on',
    );
    expect(human.stdout).toContain('! token_refused: the control plane refuses the join token');
    expect(human.stdout).toContain('This node cannot serve until the warnings marked ! are fixed.');
    expect(human.stdout).not.toContain('nothing can run');
  });
});
