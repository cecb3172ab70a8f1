import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { childHome, llmgw, llmgwBin, startDaemon } from './support/cli.js';

/** util-linux `script` runs a command on a pseudo-terminal, as a person's shell would. */
const hasScript = spawnSync('script', ['--version']).status === 0;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** `llmgw server` settings with two gateway worker processes, whose lines must follow the format too. */
function serverWithWorkers(): { config: string; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-log-format-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, 'config.yaml');
  writeFileSync(config, 'listen: 127.0.0.1:0\ngateway: {workers: 2}\n');
  return {
    config,
    env: {
      LLMGW_DATA_DIR: join(dir, 'data'),
      LLMGW_ADMIN_KEY: 'log-format-admin-key-0123456789abcdef',
      NO_COLOR: '1',
    },
  };
}

/** Both workers' start lines (and the control plane's before them). */
const workersUp = /gateway worker listening[\s\S]*gateway worker listening/;

/** `llmgw ARGS` on a pseudo-terminal; stopped with Ctrl-C typed on it. */
function onTerminal(args: string[], env: Record<string, string>) {
  const command = [process.execPath, llmgwBin, ...args]
    .map((a) => `'${a.replaceAll("'", "'\\''")}'`)
    .join(' ');
  const child: ChildProcess = spawn('script', ['-qfec', command, '/dev/null'], {
    env: { PATH: process.env['PATH'] ?? '', HOME: childHome, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.stdin?.write('\u0003');
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const code = await exited;
    clearTimeout(kill);
    return code;
  };
  cleanups.push(async () => {
    await stop();
  });
  return {
    lines: () =>
      out
        .replaceAll('\r', '')
        .split('\n')
        .filter((l) => l !== ''),
    waitFor: async (pattern: RegExp, timeoutMs = 30_000) => {
      const until = Date.now() + timeoutMs;
      while (!pattern.test(out)) {
        if (Date.now() > until || child.exitCode !== null)
          throw new Error(`no ${String(pattern)}; output so far:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop,
  };
}

const pretty = (component: string, message: string) =>
  new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  ${component}( \\(\\d+\\))?: ${message}( .*)?$`);

describe.skipIf(!hasScript)('llmgw server on a terminal', () => {
  it('writes short human lines, its gateway workers too, and stops on Ctrl-C', async () => {
    const s = serverWithWorkers();
    const t = onTerminal(['server', '-c', s.config], s.env);
    await t.waitFor(workersUp);
    const lines = t.lines();
    expect(
      lines.some((l) => pretty('control-plane', 'control plane listening').test(l)),
      lines.join('\n'),
    ).toBe(true);
    expect(
      lines.filter((l) => pretty('gateway-worker', 'gateway worker listening {2}slot=[01]').test(l)),
    ).toHaveLength(2);
    expect(lines.filter((l) => l.trimStart().startsWith('{'))).toEqual([]);
    // The command sets LLMGW_LOG_FORMAT for its workers: not a typo of a setting.
    expect(lines.filter((l) => l.includes('sets nothing'))).toEqual([]);
    expect(await t.stop()).not.toBeNull();
  });

  it('writes JSON lines with --log-format json, its gateway workers too', async () => {
    const s = serverWithWorkers();
    const t = onTerminal(['server', '-c', s.config, '--log-format', 'json'], s.env);
    await t.waitFor(workersUp);
    const logs = t.lines().map((l) => JSON.parse(l) as { component?: string; msg?: string });
    expect(
      logs.filter((l) => l.component === 'gateway-worker' && l.msg === 'gateway worker listening'),
    ).toHaveLength(2);
    expect(logs.some((l) => l.component === 'control-plane' && l.msg === 'control plane listening')).toBe(
      true,
    );
  });
});

describe('llmgw server, not on a terminal', () => {
  it('writes human lines with LLMGW_LOG_FORMAT=pretty, its gateway workers too', async () => {
    const s = serverWithWorkers();
    const d = startDaemon(['server', '-c', s.config], { ...s.env, LLMGW_LOG_FORMAT: 'pretty' });
    cleanups.push(async () => {
      await d.stop('SIGKILL');
    });
    await d.waitFor(workersUp, 30_000);
    const lines = d
      .output()
      .split('\n')
      .filter((l) => l !== '');
    expect(lines.filter((l) => pretty('gateway-worker', 'gateway worker listening').test(l))).toHaveLength(2);
    expect(lines.some((l) => pretty('control-plane', 'control plane listening').test(l))).toBe(true);
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
  });

  it.each<{ args: string[]; env: Record<string, string>; message: string }>([
    {
      args: ['up', '--log-format', 'yaml'],
      env: {},
      message: '--log-format yaml is not a log format: give json or pretty',
    },
    {
      args: ['server', '--log-format', 'JSON'],
      env: {},
      message: '--log-format JSON is not a log format: give json or pretty',
    },
    {
      args: ['gateway', '--server', 'http://127.0.0.1:9', '--key', 'k', '--log-format', 'text'],
      env: {},
      message: '--log-format text is not a log format: give json or pretty',
    },
    {
      args: ['agent', '--server', 'http://127.0.0.1:9'],
      env: { LLMGW_LOG_FORMAT: 'text' },
      message: 'LLMGW_LOG_FORMAT=text is not a log format: set it to json or pretty, or unset it',
    },
  ])('refuses llmgw $args.0 with a format it does not know (exit 2)', async ({ args, env, message }) => {
    const r = await llmgw(args, env);
    expect(r.stderr).toBe(`error: ${message}\n`);
    expect(r.code).toBe(2);
  });
});
