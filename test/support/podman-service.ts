import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { DaemonClient } from '../../src/agent/shards/container/daemon.js';
import { installed, startTied } from './tied-process.js';

/**
 * A real Podman API service of this test's own (Debian's podman, which `.ci/run` installs):
 * `podman system service` on a socket in a temporary directory, with its own storage
 * (`--root`, `--runroot`, vfs: no overlay mounts to leave behind) and temporary files, so
 * it shares nothing with another Podman on the machine. Remove the containers before
 * close() (conmon keeps them running).
 */
export interface PodmanService {
  client: DaemonClient;
  /** `unix:///…/podman.sock`. */
  host: string;
  close: () => Promise<void>;
}

export async function startPodmanService(
  options: { insecureRegistries?: string[] } = {},
): Promise<PodmanService | { skip: string }> {
  if (installed('podman') === undefined) return { skip: 'podman is not installed here' };
  const service = startTied(
    'podman',
    (dir) => {
      // As root, Podman raises each container's open-file limit to 1048576; in a sandbox without
      // CAP_SYS_RESOURCE the runtime then fails ("error setting rlimit type 7"): keep the caller's.
      writeFileSync(
        join(dir, 'containers.conf'),
        '[containers]\ndefault_ulimits = []\n\n[engine]\nevents_logger = "file"\n',
      );
      // Plain-HTTP registries (a test's own), as an operator marks a mirror without TLS.
      writeFileSync(
        join(dir, 'registries.conf'),
        (options.insecureRegistries ?? [])
          .map((r) => `[[registry]]\nlocation = "${r}"\ninsecure = true\n`)
          .join('\n'),
      );
      return [
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
        `unix://${join(dir, 'podman.sock')}`,
      ];
    },
    (dir) => ({
      CONTAINERS_CONF: join(dir, 'containers.conf'),
      CONTAINERS_REGISTRIES_CONF: join(dir, 'registries.conf'),
    }),
    'llmgw-podman-',
  );
  const host = `unix://${join(service.dir, 'podman.sock')}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      return { client: await DaemonClient.connect(host, 'podman'), host, close: service.stop };
    } catch (e) {
      if (service.exited() || Date.now() > deadline) {
        await service.stop();
        return {
          skip: `podman system service did not answer: ${service.stderr().trim() || (e instanceof Error ? e.message : String(e))}`,
        };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
