import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll } from 'vitest';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const llmgwBin = fileURLToPath(new URL('../../bin/llmgw.js', import.meta.url));

/**
 * HOME and working directory of every llmgw a test starts: a folder of this test file's own.
 * A user's saved login (~/.config/llmgw/ctl.json) and the settings of an llmgw run in the
 * checkout (./.llmgw) are then never read, nor written, by a test.
 */
export const childHome = mkdtempSync(join(tmpdir(), 'llmgw-test-home-'));
// Registered on the suite of the test file that imports this module (each file gets its own).
afterAll(() => {
  rmSync(childHome, { recursive: true, force: true });
});

/**
 * Tests never reach the internet: a model source is resolved against a fake hub the test
 * starts (HF_ENDPOINT in its env), and else against a closed port, which refuses at once.
 */
const noHub = { HF_ENDPOINT: 'http://127.0.0.1:9' };

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `llmgw` as a user would, with only the environment given (plus PATH and HOME), in childHome. */
export function llmgw(
  args: readonly string[],
  env: Record<string, string> = {},
  input?: string,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [llmgwBin, ...args], {
      env: { PATH: process.env['PATH'] ?? '', HOME: childHome, ...noHub, ...env },
      cwd: childHome,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

export interface Daemon {
  child: ChildProcess;
  output: () => string;
  /** Resolves once a line of its output matches. */
  waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpMatchArray>;
  /** Sends a signal and resolves with the exit code. */
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

/** Starts a long-running llmgw command (server, up, agent), in childHome unless given a cwd. */
export function startDaemon(
  args: readonly string[],
  env: Record<string, string>,
  cwd: string = childHome,
): Daemon {
  const child = spawn(process.execPath, [llmgwBin, ...args], {
    env: { PATH: process.env['PATH'] ?? '', HOME: childHome, ...noHub, ...env },
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters: { pattern: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of [...waiters]) {
      const m = out.match(w.pattern);
      if (m !== null) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      resolve(code);
    }),
  );
  return {
    child,
    output: () => out,
    waitFor: (pattern, timeoutMs = 20_000) =>
      new Promise((resolve, reject) => {
        const m = out.match(pattern);
        if (m !== null) {
          resolve(m);
          return;
        }
        const timer = setTimeout(() => {
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out}`));
        }, timeoutMs);
        waiters.push({
          pattern,
          resolve: (x) => {
            clearTimeout(timer);
            resolve(x);
          },
        });
        void exited.then((code) => {
          reject(new Error(`exited (${code}) before ${pattern}; output:\n${out}`));
        });
      }),
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
