import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** Subprocess tests run the built CLI, as users do: build it when the sources are newer. */
export function setup(): void {
  // For a quick run of in-process tests while the tree does not build.
  if (process.env['LLMGW_TEST_NO_BUILD'] === '1') return;
  const built = join(root, 'dist', 'cli', 'main.js');
  if (existsSync(built) && statSync(built).mtimeMs >= newest(join(root, 'src'))) return;
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    { cwd: root, stdio: 'inherit' },
  );
}
