import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A long-running program a test starts (a Podman API service, a registry) with a temporary
 * directory of its own, run under a shell that stops it and removes the directory once its
 * stdin closes: when stop() ends it, and when the test process dies without its afterAll (a
 * worker killed, a filter that ran no test of the file). Stopped by its own pid, never by name.
 */
export interface TiedProcess {
  dir: string;
  /** What it wrote to stderr so far. */
  stderr: () => string;
  exited: () => boolean;
  stop: () => Promise<void>;
}

/** Undefined when `command` is not installed (`--version` fails). */
export function installed(command: string): string | undefined {
  const v = spawnSync(command, ['--version'], { encoding: 'utf8' });
  if (v.error !== undefined) return undefined;
  return v.stdout.trim() || v.stderr.trim() || command;
}

export function startTied(
  command: string,
  args: (dir: string) => string[],
  env: (dir: string) => Record<string, string> = () => ({}),
  prefix = 'llmgw-tied-',
): TiedProcess {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const child = spawn(
    'sh',
    [
      '-c',
      '"$@" & p=$!; read _ || true; kill "$p" 2>/dev/null; wait "$p"; rm -rf "$LLMGW_TIED_DIR"',
      'sh',
      command,
      ...args(dir),
    ],
    { env: { ...process.env, ...env(dir), LLMGW_TIED_DIR: dir }, stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    dir,
    stderr: () => stderr,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.stdin.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
