import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { DaemonClient } from '../../src/agent/containers/daemon.js';

/**
 * A real Podman API service of this test's own (Debian's podman, which `.ci/run` installs):
 * `podman system service` on a socket in a temporary directory, with its own storage
 * (`--root`, `--runroot`, vfs: no overlay mounts to leave behind) and temporary files, so
 * it shares nothing with another Podman on the machine. close() stops it by its pid and
 * removes the directory; remove the containers first (conmon keeps them running).
 */
export interface PodmanService {
  client: DaemonClient;
  /** `unix:///…/podman.sock`. */
  host: string;
  close: () => Promise<void>;
}

export async function startPodmanService(): Promise<PodmanService | { skip: string }> {
  const version = spawnSync('podman', ['--version'], { encoding: 'utf8' });
  if (version.error !== undefined || version.status !== 0)
    return { skip: `podman is not installed here (${version.error?.message ?? version.stderr.trim()})` };
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-podman-'));
  const conf = join(dir, 'containers.conf');
  // As root, Podman raises each container's open-file limit to 1048576; in a sandbox without
  // CAP_SYS_RESOURCE the runtime then fails ("error setting rlimit type 7"): keep the caller's.
  writeFileSync(conf, '[containers]\ndefault_ulimits = []\n\n[engine]\nevents_logger = "file"\n');
  const socket = join(dir, 'podman.sock');
  const host = `unix://${socket}`;
  // Under a shell that stops it and removes its directory once its stdin closes: when close()
  // ends it, and when this test process dies without an afterAll (a worker killed, a filter
  // that ran no test).
  const child: ChildProcess = spawn(
    'sh',
    [
      '-c',
      'podman "$@" & p=$!; read _ || true; kill "$p" 2>/dev/null; wait "$p"; rm -rf "$LLMGW_PODMAN_DIR"',
      'sh',
      '--root',
      join(dir, 'root'),
      '--runroot',
      join(dir, 'run'),
      '--tmpdir',
      join(dir, 'tmp'),
      '--storage-driver',
      'vfs',
      'system',
      'service',
      '--time=0',
      host,
    ],
    {
      env: { ...process.env, CONTAINERS_CONF: conf, LLMGW_PODMAN_DIR: dir },
      stdio: ['pipe', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin?.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      return { client: await DaemonClient.connect(host, 'podman'), host, close };
    } catch (e) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await close();
        return {
          skip: `podman system service did not answer: ${stderr.trim() || (e instanceof Error ? e.message : String(e))}`,
        };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
