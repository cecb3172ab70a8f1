import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { installed, startTied } from './tied-process.js';
import { freePort } from '../fakes/engines/fake-engines.js';

/**
 * A real image registry of this test's own: Debian's docker-registry (the CNCF Distribution
 * registry, which `.ci/run` installs) on a port the OS gives, over plain HTTP on 127.0.0.1
 * (Docker takes 127.0.0.0/8 as insecure by default; Podman is told so in its registries.conf),
 * storing in a temporary directory.
 */
export interface TestRegistry {
  /** `127.0.0.1:PORT`, the prefix of image references it serves. */
  host: string;
  close: () => Promise<void>;
}

export async function startRegistry(): Promise<TestRegistry | { skip: string }> {
  if (installed('docker-registry') === undefined) return { skip: 'docker-registry is not installed here' };
  for (let attempt = 0; ; attempt++) {
    const host = `127.0.0.1:${await freePort()}`;
    const registry = startTied(
      'docker-registry',
      (dir) => {
        const config = join(dir, 'config.yml');
        writeFileSync(
          config,
          [
            'version: 0.1',
            'log: {level: error, accesslog: {disabled: true}}',
            `storage: {filesystem: {rootdirectory: ${join(dir, 'data')}}, delete: {enabled: true}}`,
            `http: {addr: "${host}"}`,
          ].join('\n'),
        );
        return ['serve', config];
      },
      () => ({}),
      'llmgw-registry-',
    );
    const deadline = Date.now() + 15_000;
    for (;;) {
      const ok = await fetch(`http://${host}/v2/`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return { host, close: registry.stop };
      if (registry.exited() || Date.now() > deadline) {
        const why = registry.stderr().trim();
        await registry.stop();
        // Another program took the port between the ask and the listen: once more.
        if (attempt < 2 && /address already in use/.test(why)) break;
        return { skip: `docker-registry did not answer on ${host}: ${why || 'no output'}` };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
