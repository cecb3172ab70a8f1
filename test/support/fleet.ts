import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { c } from 'tar';

import { fakeLlamaServer, freePort } from '../fakes/engines/fake-engines.js';

import { llmgw } from './cli.js';
import { until as poll } from './timing.js';

/**
 * A llama-server that records how it was started (arguments and environment) in a
 * directory, then runs the fake: how a test sees what the agent launched.
 */
export function recordingLlamaServer(dir: string): {
  bin: string;
  launches: () => { args: string[]; env: Record<string, string> }[];
} {
  const bin = join(dir, 'llama-server');
  writeFileSync(
    bin,
    [
      '#!/bin/sh',
      `printf '%s\\n' "$@" > "${dir}/args-$$"`,
      `env > "${dir}/env-$$"`,
      `exec "${process.execPath}" "${fakeLlamaServer}" "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(bin, 0o755);
  return {
    bin,
    launches: () =>
      readdirSync(dir)
        .filter((f) => f.startsWith('args-'))
        .map((f) => {
          const pid = f.slice(5);
          const env = Object.fromEntries(
            readFileSync(join(dir, `env-${pid}`), 'utf8')
              .split('\n')
              .filter((l) => l.includes('='))
              .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
          );
          return { args: readFileSync(join(dir, f), 'utf8').trim().split('\n'), env };
        }),
  };
}

/** A release site serving a llama.cpp tarball whose llama-server is the fake. */
export async function serveLlamaRelease(
  build = 'b10587',
): Promise<{ url: string; downloads: () => string[]; close: () => Promise<void> }> {
  const stage = mkdtempSync(join(tmpdir(), 'llmgw-release-'));
  const top = `llama-${build}`;
  await mkdir(join(stage, top));
  await writeFile(
    join(stage, top, 'llama-server'),
    `#!/bin/sh\nexec "${process.execPath}" "${fakeLlamaServer}" "$@"\n`,
    { mode: 0o755 },
  );
  await writeFile(join(stage, top, 'libggml.so'), 'ELF');
  const archive = join(stage, 'release.tar.gz');
  await c({ gzip: true, file: archive, cwd: stage, portable: true }, [top]);
  const body = await readFile(archive);
  const downloads: string[] = [];
  const server: Server = createServer((req, res) => {
    const asset = new RegExp(
      `^/releases/${build}/(llama-${build}-bin-ubuntu-(?:vulkan-)?x64\\.tar\\.gz)$`,
    ).exec(req.url ?? '')?.[1];
    if (asset !== undefined) {
      downloads.push(asset);
      res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': body.length });
      res.end(body);
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/releases`,
    downloads: () => [...downloads],
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export interface ReplicaJson {
  id: string;
  model: string;
  state: string;
  reason?: string;
  node?: string;
  endpoint?: string;
  restarts: number;
  retiring?: boolean;
  shards: {
    pid?: number;
    port?: number;
    devices: string[];
    node: string;
    state: string;
    reason?: string;
    last_exit?: { code: number | null; signal: string | null; log_tail: string[] };
  }[];
}

/** The replicas the last `replicas()` call saw, one line each: what `until` names when it times out. */
let replicasSeen: string | undefined;

/** `llmgw ctl replicas --json`. */
export async function replicas(env: Record<string, string>, model?: string): Promise<ReplicaJson[]> {
  const r = await llmgw(['ctl', 'replicas', ...(model === undefined ? [] : [model]), '--json'], env);
  if (r.code !== 0) throw new Error(`ctl replicas failed: ${r.stderr}`);
  const items = (JSON.parse(r.stdout) as { items: ReplicaJson[] }).items;
  replicasSeen = items
    .map(
      (x) =>
        `  ${x.id} (${x.model}) ${x.state}${typeof x.reason === 'string' ? `: ${x.reason}` : ''}; ports ${x.shards.map((s) => s.port ?? '-').join(', ')}`,
    )
    .join('\n');
  return items;
}

function seenSince(): string {
  return replicasSeen === undefined ? '' : `\nthe replicas last seen:\n${replicasSeen}`;
}

/** until, as the fleet's tests wait: a probe every 200 ms (each asks the API), naming the replicas last seen. */
export function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
): Promise<T> {
  replicasSeen = undefined;
  return poll(what, probe, timeoutMs, { everyMs: 200, detail: seenSince });
}

/**
 * An engine binary that runs a fake engine with a per-port answer delay, read from
 * `${dir}/delay-PORT` at start: how a test makes one replica of a model slow and its twin fast.
 */
export function delayedEngine(dir: string, fake: string, variable: string): string {
  const bin = join(dir, `delayed-${variable.toLowerCase()}`);
  writeFileSync(
    bin,
    [
      '#!/bin/sh',
      'port=""; prev=""',
      'for a in "$@"; do if [ "$prev" = "--port" ]; then port="$a"; fi; prev="$a"; done',
      `if [ -f "${dir}/delay-$port" ]; then ${variable}=$(cat "${dir}/delay-$port"); export ${variable}; fi`,
      `exec "${process.execPath}" "${fake}" "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(bin, 0o755);
  return bin;
}

/**
 * A placement range of a test's own (placement.ports), from a port free now: engines of
 * other clusters on this machine (other tests, another llmgw) use the default range, and a
 * port they take while an engine of the test restarts would move its replica.
 */
export async function enginePorts(size = 100): Promise<{ first: number; last: number }> {
  for (;;) {
    const first = await freePort();
    if (first + size <= 65535) return { first, last: first + size };
  }
}

/**
 * A cluster's settings for tests that run replicas on the fake llama-server `bin`: a placement
 * range of its own, quick heartbeats and stops; `extra`: top-level lines of the test's own.
 */
export async function fakeLlamaSettings(bin: string, extra: readonly string[] = []): Promise<string> {
  const ports = await enginePorts();
  return [
    `placement: {ports: ${ports.first}-${ports.last}}`,
    ...extra,
    'agent:',
    '  heartbeat_ms: 200',
    '  stop_grace_s: 2',
    '  engines:',
    '    llamacpp:',
    `      bin: ${bin}`,
  ].join('\n');
}
