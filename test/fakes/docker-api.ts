import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { frame } from '../../src/agent/shards/container/demux.js';

/**
 * A small in-process fake of the Docker Engine API on a unix socket, by default as Docker
 * 29 answers it (API 1.52, no client below 1.44): unversioned `/_ping` (with `Api-Version`
 * and `Docker-Experimental`), `/version` (ApiVersion, MinAPIVersion) and `/info`; under
 * `/vX.Y/` image inspect and pull (Docker's per-layer progress lines), container create,
 * start, inspect, wait, logs (multiplexed), stop, kill, delete and list. A versioned path
 * outside the daemon's range is refused with Docker's own 400 and message. A started
 * "container" is an HTTP server on its published port answering /health, and one log
 * line. Every request is recorded, bodies parsed.
 */

export interface FakeDockerVersions {
  /** The release, `29.0.4`. */
  version: string;
  /** Newest API version it speaks (`1.52`). */
  apiVersion: string;
  /** Oldest it accepts (`1.44`). */
  minApiVersion: string;
}

export const docker29: FakeDockerVersions = { version: '29.0.4', apiVersion: '1.52', minApiVersion: '1.44' };

export interface FakeDockerRequest {
  method: string;
  url: string;
  body: unknown;
}

interface FakeContainer {
  id: string;
  name: string;
  spec: Record<string, unknown>;
  state: 'created' | 'running' | 'exited';
  exitCode: number;
  server?: http.Server;
  waiters: (() => void)[];
}

export interface FakeDocker {
  host: string;
  requests: FakeDockerRequest[];
  containers: Map<string, FakeContainer>;
  /** Another release answers from now on, as after `apt upgrade docker-ce` under a running agent. */
  upgrade: (versions: FakeDockerVersions) => void;
  close: () => Promise<void>;
}

function older(a: string, b: string): boolean {
  const [amaj = 0, amin = 0] = a.split('.').map(Number);
  const [bmaj = 0, bmin = 0] = b.split('.').map(Number);
  return amaj !== bmaj ? amaj < bmaj : amin < bmin;
}

export async function startFakeDocker(
  options: Partial<FakeDockerVersions> & { images?: string[]; pid?: number } = {},
): Promise<FakeDocker> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-fake-docker-'));
  const socket = join(dir, 'docker.sock');
  let versions: FakeDockerVersions = { ...docker29, ...options };
  const images = new Set(options.images ?? []);
  const requests: FakeDockerRequest[] = [];
  const containers = new Map<string, FakeContainer>();
  const streams = new Set<http.ServerResponse>();

  const json = (res: http.ServerResponse, status: number, value: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json', 'api-version': versions.apiVersion });
    res.end(JSON.stringify(value));
  };
  const exit = (c: FakeContainer, code: number): void => {
    if (c.state !== 'running') return;
    c.state = 'exited';
    c.exitCode = code;
    c.server?.close();
    for (const w of c.waiters.splice(0)) w();
  };
  const find = (ref: string): FakeContainer | undefined =>
    containers.get(ref) ?? [...containers.values()].find((c) => c.name === ref);

  function route(req: http.IncomingMessage, res: http.ServerResponse, url: URL, body: unknown): void {
    let path = url.pathname;
    const v = /^\/v(\d+\.\d+)(\/.*)$/.exec(path);
    if (v !== null) {
      const asked = v[1] ?? '';
      if (older(asked, versions.minApiVersion)) {
        json(res, 400, {
          message: `client version ${asked} is too old. Minimum supported API version is ${versions.minApiVersion}, please upgrade your client to a newer version`,
        });
        return;
      }
      if (older(versions.apiVersion, asked)) {
        json(res, 400, {
          message: `client version ${asked} is too new. Maximum supported API version is ${versions.apiVersion}`,
        });
        return;
      }
      path = v[2] ?? '';
    }
    if (path === '/_ping') {
      res.writeHead(200, {
        'content-type': 'text/plain; charset=utf-8',
        'api-version': versions.apiVersion,
        'docker-experimental': 'false',
        ostype: 'linux',
        'builder-version': '2',
        swarm: 'inactive',
      });
      res.end('OK');
      return;
    }
    if (path === '/version') {
      json(res, 200, {
        Platform: { Name: 'Docker Engine - Community' },
        Components: [
          {
            Name: 'Engine',
            Version: versions.version,
            Details: { ApiVersion: versions.apiVersion, MinAPIVersion: versions.minApiVersion, Os: 'linux' },
          },
        ],
        Version: versions.version,
        ApiVersion: versions.apiVersion,
        MinAPIVersion: versions.minApiVersion,
        Os: 'linux',
        Arch: 'amd64',
      });
      return;
    }
    if (path === '/info') {
      json(res, 200, {
        Runtimes: { runc: { path: 'runc' }, 'io.containerd.runc.v2': { path: 'runc' } },
        CDISpecDirs: ['/etc/cdi', '/var/run/cdi'],
      });
      return;
    }
    let m: RegExpExecArray | null;
    if ((m = /^\/images\/(.+)\/json$/.exec(path)) !== null) {
      const name = m[1] ?? '';
      if (images.has(name)) json(res, 200, { Id: 'sha256:5e1f', RepoTags: [name] });
      else json(res, 404, { message: `No such image: ${name}` });
      return;
    }
    if (path === '/images/create' && req.method === 'POST') {
      const ref = `${url.searchParams.get('fromImage') ?? ''}:${url.searchParams.get('tag') ?? 'latest'}`;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(`${JSON.stringify({ status: `Pulling from ${ref}`, id: 'tag' })}\n`);
      res.write(`${JSON.stringify({ status: 'Pulling fs layer', progressDetail: {}, id: 'a1' })}\n`);
      res.write(
        `${JSON.stringify({ status: 'Downloading', progressDetail: { current: 512, total: 1024 }, id: 'a1' })}\n`,
      );
      images.add(ref);
      res.end(`${JSON.stringify({ status: 'Pull complete', progressDetail: {}, id: 'a1' })}\n`);
      return;
    }
    if (path === '/containers/create' && req.method === 'POST') {
      const spec = body as Record<string, unknown>;
      const name = url.searchParams.get('name') ?? randomBytes(4).toString('hex');
      if (!images.has(String(spec['Image']))) {
        json(res, 404, { message: `No such image: ${String(spec['Image'])}` });
        return;
      }
      if (find(name) !== undefined) {
        json(res, 409, { message: `Conflict. The container name "/${name}" is already in use` });
        return;
      }
      const id = randomBytes(32).toString('hex');
      containers.set(id, { id, name, spec, state: 'created', exitCode: 0, waiters: [] });
      json(res, 201, { Id: id, Warnings: [] });
      return;
    }
    if (path === '/containers/json') {
      const want = (JSON.parse(url.searchParams.get('filters') ?? '{}') as { label?: string[] }).label ?? [];
      const list = [...containers.values()]
        .filter((c) => {
          const labels = (c.spec['Labels'] ?? {}) as Record<string, string>;
          return want.every((l) => {
            const [k = '', val] = l.split('=');
            return labels[k] === val;
          });
        })
        .map((c) => ({ Id: c.id, Names: [`/${c.name}`], Labels: c.spec['Labels'], State: c.state }));
      json(res, 200, list);
      return;
    }
    if ((m = /^\/containers\/([^/]+)(\/[a-z]+)?$/.exec(path)) !== null) {
      const c = find(m[1] ?? '');
      if (c === undefined) {
        json(res, 404, { message: `No such container: ${m[1] ?? ''}` });
        return;
      }
      containerVerb(c, m[2] ?? '', req, res);
      return;
    }
    json(res, 404, { message: 'page not found' });
  }

  function containerVerb(
    c: FakeContainer,
    verb: string,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): void {
    if (verb === '' && req.method === 'DELETE') {
      exit(c, 137);
      containers.delete(c.id);
      res.writeHead(204).end();
    } else if (verb === '/start') {
      if (c.state === 'running') {
        res.writeHead(304).end();
        return;
      }
      c.state = 'running';
      const host = (c.spec['HostConfig'] ?? {}) as {
        PortBindings?: Record<string, { HostIp: string; HostPort: string }[]>;
      };
      const binding = Object.values(host.PortBindings ?? {})[0]?.[0];
      c.server = http.createServer((_, r) => r.writeHead(200).end('{"status":"ok"}'));
      if (binding !== undefined) c.server.listen(Number(binding.HostPort), binding.HostIp);
      res.writeHead(204).end();
    } else if (verb === '/json') {
      json(res, 200, {
        Id: c.id,
        Name: `/${c.name}`,
        State: {
          Status: c.state,
          Running: c.state === 'running',
          Pid: c.state === 'running' ? (options.pid ?? 4343) : 0,
          ExitCode: c.exitCode,
        },
        Config: { Labels: c.spec['Labels'] },
      });
    } else if (verb === '/wait') {
      const answer = () => json(res, 200, { StatusCode: c.exitCode, Error: null });
      if (c.state === 'exited') answer();
      else c.waiters.push(answer);
    } else if (verb === '/logs') {
      res.writeHead(200, { 'content-type': 'application/vnd.docker.multiplexed-stream' });
      res.write(frame(1, 'hello from the fake docker\n'));
      streams.add(res);
      c.waiters.push(() => {
        streams.delete(res);
        res.end();
      });
    } else if (verb === '/stop' || verb === '/kill') {
      if (c.state !== 'running') {
        if (verb === '/stop') res.writeHead(304).end();
        else json(res, 409, { message: `Container ${c.id} is not running` });
        return;
      }
      exit(c, verb === '/stop' ? 0 : 137);
      res.writeHead(204).end();
    } else {
      json(res, 404, { message: 'page not found' });
    }
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      const body: unknown = text === '' ? undefined : JSON.parse(text);
      const url = new URL(req.url ?? '/', 'http://docker');
      requests.push({ method: req.method ?? '', url: `${url.pathname}${url.search}`, body });
      route(req, res, url, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    host: `unix://${socket}`,
    requests,
    containers,
    upgrade: (next) => {
      versions = { ...next };
    },
    close: async () => {
      for (const c of containers.values()) exit(c, 0);
      for (const s of streams) s.end();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
