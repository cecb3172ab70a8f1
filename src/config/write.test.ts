import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { removeTempCopies, writeFileAtomic } from './write.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-write-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A pid that no process has: one that just exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  const pid = child.pid;
  await new Promise((resolve) => child.on('exit', resolve));
  if (pid === undefined) throw new Error('no pid');
  return pid;
}

describe('writeFileAtomic', () => {
  it('replaces the file whole, its owner only, with nothing left beside it', () => {
    const path = join(dir, 'sub', 'config.yaml');
    writeFileAtomic(path, 'a: 1\n');
    writeFileAtomic(path, 'a: 2\n');
    expect(readFileSync(path, 'utf8')).toBe('a: 2\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'sub')).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(dir, 'sub'))).toEqual(['config.yaml']);
  });

  it("removes the temporary copies a killed writer left, and keeps a live writer's and other files", async () => {
    const path = join(dir, 'config.yaml');
    const dead = `config.yaml.${await deadPid()}.0a1b2c3d.tmp`;
    const live = `config.yaml.${process.ppid}.0a1b2c3d.tmp`;
    const others = ['other.yaml.1.0a1b2c3d.tmp', 'config.yaml.bak', 'config.yaml.12.nothex00.tmp'];
    for (const f of [dead, live, ...others]) writeFileSync(join(dir, f), 'hub:\n  token: old\n');
    writeFileAtomic(path, 'a: 1\n');
    expect(readdirSync(dir).sort()).toEqual(['config.yaml', live, ...others].sort());
    removeTempCopies(path);
    expect(readdirSync(dir)).toContain(live);
  });

  // A kill -9 cannot tell a flushed write from one left in the page cache (the kernel keeps
  // both); a power cut can. So the order of the system calls is checked: the new text is
  // flushed before the rename makes it the file, and the directory after it.
  const strace = spawnSync('strace', ['-o', '/dev/null', 'true']).status === 0;
  it.skipIf(!strace)(
    'flushes the temporary file before renaming it over the file, and the directory after (strace)',
    () => {
      const built = fileURLToPath(new URL('../../dist/config/write.js', import.meta.url));
      const path = join(dir, 'config.yaml');
      const trace = join(dir, 'trace.txt');
      const script = `import(${JSON.stringify(built)}).then((m) => m.writeFileAtomic(${JSON.stringify(path)}, 'a: 1\\n'))`;
      const run = spawnSync('strace', [
        '-f',
        '-e',
        'trace=openat,write,fsync,fdatasync,rename,renameat,renameat2,close',
        '-o',
        trace,
        process.execPath,
        '-e',
        script,
      ]);
      expect(run.status, run.stderr.toString()).toBe(0);
      const calls = readFileSync(trace, 'utf8')
        .split('\n')
        .map((l) => l.replace(/^\d+\s+/, ''));
      const tmpOpen = calls.findIndex((l) =>
        /^openat\(.*config\.yaml\.\d+\.[0-9a-f]{8}\.tmp".*= \d+$/.test(l),
      );
      expect(tmpOpen, 'the temporary file is opened').toBeGreaterThanOrEqual(0);
      const tmpFd = /= (\d+)$/.exec(calls[tmpOpen] ?? '')?.[1];
      // The first call at or after `from` that matches; -1 when none (or `from` is -1).
      const after = (from: number, re: RegExp) => {
        if (from < 0) return -1;
        const i = calls.slice(from).findIndex((l) => re.test(l));
        return i < 0 ? -1 : from + i;
      };
      const written = after(tmpOpen, new RegExp(`^write\\(${tmpFd}, "a: 1\\\\n"`));
      const flushed = after(written, new RegExp(`^f(data)?sync\\(${tmpFd}\\)`));
      const renamed = after(flushed, /^rename(at2?)?\(.*\.tmp".*config\.yaml"/);
      const dirOpen = after(renamed, new RegExp(`^openat\\(.*"${dir}".*= \\d+$`));
      const dirFd = /= (\d+)$/.exec(calls[dirOpen] ?? '')?.[1];
      const dirFlushed = after(dirOpen, new RegExp(`^fsync\\(${dirFd}\\)`));
      for (const [name, i] of Object.entries({ written, flushed, renamed, dirOpen, dirFlushed }))
        expect(i, `${name}, in order:\n${calls.join('\n')}`).toBeGreaterThan(0);
    },
  );
});
