import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll } from 'vitest';

import { startDaemon, type Daemon } from './cli.js';

/**
 * `llmgw server` as a child process, as operators run it: started on a data dir (and a
 * database), killed with SIGKILL or stopped with SIGTERM, started again on the same data
 * dir, database and (by default) the same address. For the reliability suite: crashes,
 * failovers, restarts.
 */
export interface ServerProcess {
  /** Where it listens now (http://127.0.0.1:PORT). */
  readonly url: string;
  /** The pid of the running process (of the last one, once it has exited). */
  readonly pid: number;
  readonly dataDir: string;
  /** The settings file it was started with (in its data dir). */
  readonly configPath: string;
  readonly adminKey: string;
  /** The database it uses: `sqlite:PATH` in its data dir, or the PostgreSQL URL given. */
  readonly database: string;
  /** Whether the current process has not exited. */
  readonly running: boolean;
  /** Resolves once the current run listens (at once if it does); rejects if it exits first. */
  listening(): Promise<void>;
  /** The output (JSON log lines) of the current run. */
  output(): string;
  /** The output of every run so far, oldest first. */
  runs(): readonly string[];
  /** SIGKILL: no chance to close the store, flush or finish a request. Resolves once it has exited. */
  kill(): Promise<void>;
  /** SIGTERM: a clean stop. Resolves with the exit code. */
  stop(): Promise<number | null>;
  /**
   * Starts it again on the same data dir and database, once the last run has exited; on the
   * same port unless told otherwise (then wherever the OS gives).
   */
  restart(options?: { samePort?: boolean; wait?: boolean }): Promise<void>;
  /** Stops it (SIGKILL) if it runs, and removes its data dir unless it was given one. */
  cleanup(): Promise<void>;
}

export interface ServerProcessOptions {
  /** The settings file's text; default none (every setting at its default). */
  config?: string;
  /** `postgres://...`; default an SQLite file in the data dir. */
  database?: string;
  /** The data dir; default a temporary one, removed by cleanup(). */
  dataDir?: string;
  /** LLMGW_ADMIN_KEY; default a fixed test key. */
  adminKey?: string;
  /** Other environment variables (LLMGW_ENGINE_KEY_SECRET, HF_ENDPOINT, ...). */
  env?: Record<string, string>;
  /** HOST:PORT of the first start; default 127.0.0.1:0 (the OS picks). */
  listen?: string;
  /** How long a start may take before it is a failure; default 30 s. */
  startTimeoutMs?: number;
  /** Whether to wait until it listens (default); without, see listening(). */
  wait?: boolean;
}

export const testAdminKey = 'server-process-admin-key-0123456789abcdef';

/** Every child started in this test file, killed when it ends, whatever the tests did. */
const started = new Set<ServerProcess>();
afterAll(async () => {
  await Promise.all([...started].map((s) => s.cleanup()));
});
// Should the test runner itself die, no control plane is left running beside it.
process.once('exit', () => {
  for (const s of started) if (s.running) process.kill(s.pid, 'SIGKILL');
});

/** Starts `llmgw server` (the built CLI: run `npm run build:server` first) and waits until it listens. */
export async function startServerProcess(options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'llmgw-server-'));
  const configPath = join(dataDir, 'config.yaml');
  writeFileSync(configPath, options.config ?? '', { mode: 0o600 });
  const database = options.database ?? `sqlite:${join(dataDir, 'llmgw.db')}`;
  const adminKey = options.adminKey ?? testAdminKey;
  const env = {
    LLMGW_DATA_DIR: dataDir,
    LLMGW_CONFIG: configPath,
    LLMGW_DATABASE: database,
    LLMGW_ADMIN_KEY: adminKey,
    ...options.env,
  };
  const timeoutMs = options.startTimeoutMs ?? 30_000;

  let daemon: Daemon;
  let url = '';
  let exited = false;
  let listening: Promise<void> = Promise.resolve();
  // Every run, kept: a failed check shows what each one said.
  const daemons: Daemon[] = [];

  const launch = (listen: string): Promise<void> => {
    exited = false;
    daemon = startDaemon(['server', '--listen', listen], env, dataDir);
    const run = daemon;
    daemons.push(run);
    run.child.on('exit', () => {
      exited = true;
    });
    listening = run.waitFor(/^.*"msg":"control plane listening".*$/m, timeoutMs).then((line) => {
      url = listeningUrl(line[0]);
    });
    // Awaited by whoever waits; a run killed before it listens is no failure of its own.
    listening.catch(() => undefined);
    return listening;
  };

  const handle: ServerProcess = {
    get url() {
      return url;
    },
    get pid() {
      return daemon.child.pid ?? -1;
    },
    dataDir,
    configPath,
    adminKey,
    database,
    get running() {
      return !exited;
    },
    listening: () => listening,
    output: () => daemon.output(),
    runs: () => daemons.map((d) => d.output()),
    kill: async () => {
      await daemon.stop('SIGKILL');
    },
    stop: () => daemon.stop('SIGTERM'),
    restart: async ({ samePort = true, wait = true } = {}) => {
      if (!exited) throw new Error('restart() needs the last run to have exited: kill() or stop() it first');
      const started = launch(samePort && url !== '' ? new URL(url).host : '127.0.0.1:0');
      if (wait) await started;
    },
    cleanup: async () => {
      started.delete(handle);
      if (!exited) await daemon.stop('SIGKILL');
      if (ownDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  started.add(handle);
  try {
    const first = launch(options.listen ?? '127.0.0.1:0');
    if (options.wait ?? true) await first;
  } catch (e) {
    await handle.cleanup();
    throw e;
  }
  return handle;
}

/** The URL of the "control plane listening" log line (JSON, pino). */
function listeningUrl(line: string): string {
  const parsed = JSON.parse(line) as { url?: unknown };
  if (typeof parsed.url !== 'string') throw new Error(`no url in the line: ${line}`);
  return parsed.url;
}
