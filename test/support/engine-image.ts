import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as tar from 'tar';

import { DaemonClient, readJsonLines } from '../../src/agent/shards/container/daemon.js';
import { imagePresent } from '../../src/agent/shards/container/pull.js';
import type { ContainerRun } from '../../src/agent/shards/container/types.js';
import type { ShardRun } from '../../src/agent/shards/types.js';

/**
 * A container image of the fake llama-server, built locally (this machine has no
 * registry): FROM scratch with this machine's node binary, the libraries `ldd` lists for
 * it, and the fake at /app. Tagged by a hash of its inputs, so a second test file (or run)
 * finds it built.
 */

const fakes = join(dirname(fileURLToPath(import.meta.url)), '..', 'fakes', 'engines');
/** The fake and every module beside it (what it imports: a split of the fake needs no change here). */
const appFiles = readdirSync(fakes)
  .filter((f) => f.endsWith('.mjs'))
  .sort();

/** Where the fake llama-server is in the image; run it as `/usr/bin/node /app/llama-server.mjs …`. */
export const imageNode = '/usr/bin/node';
export const imageLlamaServer = '/app/llama-server.mjs';

/** The daemon this machine's tests use, or why there is none. */
export async function testDaemon(): Promise<{ client: DaemonClient } | { skip: string }> {
  const host = process.env['DOCKER_HOST'] ?? 'unix:///var/run/docker.sock';
  try {
    return { client: await DaemonClient.connect(host) };
  } catch (e) {
    return { skip: e instanceof Error ? e.message : `no container daemon answers at ${host}` };
  }
}

function nodeLibraries(node: string): string[] {
  const out = execFileSync('ldd', [node], { encoding: 'utf8' });
  const libs: string[] = [];
  for (const line of out.split('\n')) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m?.[1] !== undefined) libs.push(m[1]);
  }
  return libs;
}

/** Builds the image unless its tag is there already; resolves with the tag. */
export async function buildEngineImage(client: DaemonClient): Promise<string> {
  const node = process.execPath;
  const libs = nodeLibraries(node);
  const hash = createHash('sha256');
  for (const file of [node, ...libs]) {
    const s = statSync(file);
    hash.update(`${file}:${s.size}:${s.mtimeMs}\n`);
  }
  for (const f of appFiles) hash.update(readFileSync(join(fakes, f)));
  const tag = `llmgw-test-engine:${hash.digest('hex').slice(0, 12)}`;
  if (await imagePresent(client, tag)) return tag;

  const stage = mkdtempSync(join(tmpdir(), 'llmgw-engine-image-'));
  try {
    const put = (from: string, to: string): void => {
      const target = join(stage, to);
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(from, target);
    };
    put(node, imageNode);
    for (const lib of libs) put(lib, lib);
    for (const f of appFiles) put(join(fakes, f), `/app/${f}`);
    mkdirSync(join(stage, 'tmp'));
    writeFileSync(join(stage, 'Dockerfile'), 'FROM scratch\nCOPY . /\n');
    await postBuild(client, tag, tar.c({ cwd: stage, portable: true }, ['.']));
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
  return tag;
}

/** A file of a derived image: its path in the image, content and mode. */
export interface ImageFile {
  path: string;
  content: string | Buffer;
  mode?: number;
}

/** Builds `FROM base` plus `files` (one layer) as `tag`, on Docker or Podman. */
export async function buildDerivedImage(
  client: DaemonClient,
  base: string,
  tag: string,
  files: readonly ImageFile[],
): Promise<string> {
  const stage = mkdtempSync(join(tmpdir(), 'llmgw-derived-image-'));
  try {
    mkdirSync(join(stage, 'layer'));
    for (const f of files) {
      const target = join(stage, 'layer', f.path);
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, f.content, { mode: f.mode ?? 0o644 });
    }
    writeFileSync(join(stage, 'Dockerfile'), `FROM ${base}\nCOPY layer/ /\n`);
    await postBuild(client, tag, tar.c({ cwd: stage, portable: true }, ['.']));
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
  return tag;
}

/** `repo:tag` for Docker's and Podman's tag endpoints. */
function splitTag(ref: string): { repo: string; tag: string } {
  const colon = ref.lastIndexOf(':');
  return colon > ref.lastIndexOf('/')
    ? { repo: ref.slice(0, colon), tag: ref.slice(colon + 1) }
    : { repo: ref, tag: 'latest' };
}

export async function tagImage(client: DaemonClient, image: string, as: string): Promise<void> {
  await client.call({ method: 'POST', path: `/images/${image}/tag`, query: splitTag(as) });
}

/** Removes the tag (the image too once it has no other); never a container's image by force. */
export async function removeImage(client: DaemonClient, image: string): Promise<void> {
  await client.call({ method: 'DELETE', path: `/images/${image}` });
}

/**
 * Pushes `image` (a `HOST:PORT/repo:tag` reference) to its registry: Docker's push wants an
 * X-Registry-Auth header even for a registry without auth; Podman's is told the registry
 * speaks plain HTTP.
 */
export function pushImage(client: DaemonClient, image: string): Promise<void> {
  const query =
    client.kind === 'podman' ? { destination: image, tlsVerify: false } : { tag: splitTag(image).tag };
  const name = client.kind === 'podman' ? image : splitTag(image).repo;
  return streamedCall(client, `pushing ${image}`, {
    path: client.url(`/images/${name}/push`, query),
    headers: { 'x-registry-auth': Buffer.from('{}').toString('base64') },
  });
}

/** `POST /build?t=TAG` with the context as a tar stream (the daemon's legacy builder: no BuildKit needed). */
function postBuild(
  client: DaemonClient,
  tag: string,
  context: { pipe: (to: http.ClientRequest) => unknown },
): Promise<void> {
  return streamedCall(client, `building ${tag}`, {
    path: client.url('/build', { t: tag, rm: true, forcerm: true }),
    headers: { 'content-type': 'application/x-tar' },
    body: context,
  });
}

/**
 * A POST whose answer streams JSON lines (builds, pushes): the daemon reports a failure in
 * an `error` line of a 200 answer, or as the `message` of an error status.
 */
function streamedCall(
  client: DaemonClient,
  what: string,
  o: { path: string; headers: Record<string, string>; body?: { pipe: (to: http.ClientRequest) => unknown } },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        ...client.endpoint,
        method: 'POST',
        path: o.path,
        headers: { host: 'docker', ...o.headers },
        agent: false,
      },
      (res) => {
        let error: string | undefined;
        readJsonLines(res, (line) => {
          const e = line as { error?: unknown; message?: unknown };
          if (typeof e.error === 'string') error = e.error;
          if (typeof e.message === 'string' && (res.statusCode ?? 0) >= 400) error = e.message;
        }).then(() => {
          if (error !== undefined || (res.statusCode ?? 0) >= 400)
            reject(new Error(`${what} failed: ${error ?? `status ${res.statusCode}`}`));
          else resolve();
        }, reject);
      },
    );
    req.on('error', reject);
    if (o.body === undefined) req.end();
    else o.body.pipe(req);
  });
}

/**
 * A shard run of the fake llama-server in `image`, serving `model` (under `dir`, mounted
 * read-only) on `port` of the loopback: what the container tests give a supervisor.
 */
export function fakeEngineRun(o: {
  key: string;
  port: number;
  image: string;
  dir: string;
  model: string;
  env: Record<string, string>;
  container?: Partial<ContainerRun>;
}): ShardRun {
  const [replica = o.key, rank = '0'] = o.key.split('/');
  return {
    key: o.key,
    replica,
    rank: Number(rank),
    processes: [
      {
        name: 'llama-server',
        bin: imageNode,
        args: [imageLlamaServer, '-m', o.model, '--host', '0.0.0.0', '--port', String(o.port)],
        env: o.env,
      },
    ],
    container: {
      image: o.image,
      pull: 'never',
      gpus: [],
      gpuRequest: 'nvidia',
      mounts: [{ source: o.dir, target: o.dir, readOnly: true }],
      network: 'bridge',
      publish: { hostIp: '127.0.0.1', port: o.port },
      ipc: { shmBytes: 64 * 2 ** 20 },
      labels: {},
      ...o.container,
    },
    health: { url: `http://127.0.0.1:${String(o.port)}/health`, loading: 'answers-503' },
    stopGraceMs: 3000,
  };
}
